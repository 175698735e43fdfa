"""Shared pieces of the Slack channel tests: a running bot on the Slack fake, and waits.

`serving` runs the real stack in-process (`Worker` on a `MemoryBus` and `SqliteStore`, a
`Gateway` around the real `SlackAdapter`, so slack-bolt and slack_sdk talk to `FakeSlack`)
and stops it cleanly. Events go in over signed HTTP or the Socket Mode websocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr

from bots.platforms import REGISTERED, command_registry
from channels import slack
from channels.gateway import Gateway
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.streaming import IncrementalRender, ReplyStreams
from core.bus.memory import MemoryBus
from core.commands import CommandRegistry
from core.policy import ChannelPolicy
from core.providers.base import Provider
from core.replies import MemoryReplyRecords
from core.runtime import AgentRuntime
from core.store.base import Store
from core.tools import ToolRegistry, builtin_tools
from core.worker import Worker
from tests.fakes.slack_api import FakeSlack, SentMessage
from tests.workers import build_worker

# How long a wait lasts before the test fails instead of hanging; only reached when broken.
PATIENCE = 5.0

# The chat commands of the product: the worker runs them, the gateway lists them.
COMMANDS = command_registry()
MENU = COMMANDS.menu()

_CODE_BLOCK = re.compile(r"```\n(.*?)\n```", re.DOTALL)


@dataclass
class Serving:
    """One running Slack app: the parts a test looks at, and how to send it events."""

    fake: FakeSlack
    adapter: SlackAdapter
    gateway: Gateway
    worker: Worker
    store: Store
    provider: Provider
    mode: Literal["http", "socket"]

    @property
    def events_url(self) -> str:
        """The adapter's Events API endpoint (HTTP mode)."""
        return f"http://127.0.0.1:{self.adapter.port}/slack/events"

    async def send(self, body: dict[str, Any], *, retry_num: int | None = None) -> None:
        """Deliver an event callback the way this app receives them; it was acknowledged."""
        if self.mode == "socket":
            envelope = await self.fake.send_socket_event(body, retry_attempt=retry_num or 0)
            await self.fake.wait_for_ack(envelope, timeout=PATIENCE)
            return
        status, text = await self.fake.post_event(self.events_url, body, retry_num=retry_num)
        assert status == 200, (status, text)


@asynccontextmanager
async def serving(
    fake: FakeSlack,
    store: Store,
    provider: Provider,
    *,
    mode: Literal["http", "socket"] = "http",
    policy: ChannelPolicy | None = None,
    commands: CommandRegistry | None = None,
    stream_interval: float = 0.05,
    **options: Any,
) -> AsyncIterator[Serving]:
    """Run a worker and a Slack gateway until the block ends; `options` go to the settings.

    Yields once the adapter is listening (its server is up, or its socket connected).
    """
    credentials: dict[str, Any] = (
        {"app_token": SecretStr(fake.app_token)}
        if mode == "socket"
        else {"signing_secret": SecretStr(fake.signing_secret)}
    )
    settings: dict[str, Any] = {"host": "127.0.0.1", "port": 0}
    adapter = SlackAdapter(
        SlackSettings(
            bot_token=SecretStr(fake.bot_token),
            api_url=fake.api_url,
            **(credentials | settings | options),
        ),
        menu=(commands or COMMANDS).menu(),
        replies=ReplyStreams(MemoryReplyRecords(), IncrementalRender()),
    )
    bus = MemoryBus()
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry(builtin_tools()),
        store=store,
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=policy or ChannelPolicy(modes=REGISTERED.default_modes()),
        commands=commands or COMMANDS,
        prompt_hints={"slack": slack.PROMPT_HINT},
        stream_interval=stream_interval,
    )
    gateway = Gateway(adapter, bus)
    worker_task = asyncio.create_task(worker.run(), name="test-worker")
    gateway_task = asyncio.create_task(gateway.run(), name="test-gateway")
    try:
        await _unless_failed(adapter.listening.wait(), gateway_task)
        if mode == "socket":
            await fake.wait_socket_connected(timeout=PATIENCE)
        yield Serving(fake, adapter, gateway, worker, store, provider, mode)
    finally:
        await gateway.stop()
        async with asyncio.timeout(PATIENCE):
            await gateway_task
        await worker.stop(grace=PATIENCE)
        async with asyncio.timeout(PATIENCE):
            await worker_task
        await bus.close()
        await provider.aclose()


async def _unless_failed(ready: Any, task: asyncio.Task[None]) -> None:
    """Await `ready`, but fail at once with the task's error if the task ends first."""
    waiting = asyncio.ensure_future(ready)
    done, _ = await asyncio.wait(
        {waiting, task}, timeout=PATIENCE, return_when=asyncio.FIRST_COMPLETED
    )
    if waiting not in done:
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        if task.done():
            task.result()
        raise AssertionError("the Slack gateway did not start listening")
    waiting.result()


async def reply_containing(
    fake: FakeSlack,
    channel: str,
    needle: str,
    timeout: float = PATIENCE,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
) -> SentMessage:
    """The bot's message in `channel` whose current text contains `needle`, once there is one."""

    def found() -> SentMessage | None:
        return next((m for m in fake.messages.get(channel, []) if needle in m.text), None)

    await fake.until(lambda: found() is not None, f"{needle!r} in {channel}", timeout)
    message = found()
    assert message is not None
    return message


def code_blocks(texts: Sequence[str]) -> list[str]:
    """The text inside each ```` ``` ```` block of the given messages, in order."""
    return [block for text in texts for block in _CODE_BLOCK.findall(text)]


def unescape(mrkdwn: str) -> str:
    """Text as Slack shows it: its three entities decoded."""
    return mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
