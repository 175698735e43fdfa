"""Shared pieces of the Slack channel tests: a running bot on the Slack fake, and waits.

`serving` runs the real stack in-process (`Worker` on a `MemoryBus` and `SqlStore`, a
`Gateway` around the real `SlackAdapter`, so slack-bolt and slack_sdk talk to `FakeSlack`)
and stops it cleanly. Events go in over signed HTTP or the Socket Mode websocket.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr

from channels.attachments import DocumentReader
from channels.gateway import Gateway
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.slack.spec import SPEC
from core.commands import CommandRegistry
from core.policy import ChannelPolicy
from core.providers.base import Provider
from core.store.base import Store
from core.tools import Tool
from core.worker import Worker
from tests.fakes.slack_api import FakeSlack, SentMessage
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot

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

    async def command(self, payload: dict[str, str]) -> None:
        """Deliver a slash command the way this app receives them; it was acknowledged."""
        if self.mode == "socket":
            envelope = await self.fake.send_socket_command(payload)
            await self.fake.wait_for_ack(envelope, timeout=PATIENCE)
            return
        status, text = await self.fake.post_command(self.events_url, payload)
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
    documents: DocumentReader | None = None,
    catch_up: bool = False,
    tools: Sequence[Tool[Any]] = (),
    confirm_timeout: float | None = None,
    **options: Any,
) -> AsyncIterator[Serving]:
    """Run a worker and a Slack gateway until the block ends; `options` go to the settings.

    With `catch_up`, the adapter keeps its seen marks in `store` and catches up at start.
    `tools` and `confirm_timeout` go to `running_bot` (extra tools; the confirmation gate).

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
        replies=local_replies(),
        seen=store if catch_up else None,
        documents=documents,
        uploads=SPEC.uploads,  # Slack's limits, as the product builds it
    )

    async def ready() -> None:
        await adapter.listening.wait()
        if mode == "socket":
            await fake.wait_socket_connected(timeout=PATIENCE)

    async with running_bot(
        adapter,
        store,
        provider,
        ready=ready,
        policy=policy,
        commands=commands,
        stream_interval=stream_interval,
        tools=tools,
        confirm_timeout=confirm_timeout,
    ) as bot:
        yield Serving(fake, adapter, bot.gateway, bot.worker, store, provider, mode)


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
