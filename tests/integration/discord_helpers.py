"""Shared pieces of the Discord channel tests: a running bot on the Discord fake, and waits.

`serving` runs the real stack in-process (`Worker` on a `MemoryBus` and `SqliteStore`, a
`Gateway` around the real `DiscordAdapter`, so discord.py talks to `FakeDiscord` over its
gateway websocket and REST) and stops it cleanly. Every wait is for something the fake
observes, never for time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from bots.platforms import REGISTERED, command_registry
from channels import discord as discord_channel
from channels.discord.adapter import DiscordAdapter, DiscordSettings
from channels.gateway import Gateway
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
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.workers import build_worker

# How long a wait lasts before the test fails instead of hanging; only reached when broken.
PATIENCE = 5.0

# The chat commands of the product: the worker runs them, the gateway lists them.
COMMANDS = command_registry()
MENU = COMMANDS.menu()

_FENCE = re.compile(r"^```", re.MULTILINE)
_CODE_BLOCK = re.compile(r"^```[\w+#.-]*\n(.*?)\n```$", re.DOTALL | re.MULTILINE)


@dataclass
class Serving:
    """One running bot: the parts a test looks at."""

    fake: FakeDiscord
    adapter: DiscordAdapter
    gateway: Gateway
    worker: Worker
    bus: MemoryBus
    store: Store
    provider: Provider


@asynccontextmanager
async def serving(
    fake: FakeDiscord,
    store: Store,
    provider: Provider,
    *,
    policy: ChannelPolicy | None = None,
    commands: CommandRegistry | None = None,
    stream_interval: float = 0.05,
    **options: Any,
) -> AsyncIterator[Serving]:
    """Run a worker and a Discord gateway until the block ends; `options` go to the settings.

    Yields once the bot has identified and the fake has sent READY and its GUILD_CREATE.
    """
    settings: dict[str, Any] = dict(options)
    adapter = DiscordAdapter(
        DiscordSettings(
            token=SecretStr(fake.token),
            api_url=fake.api_url,
            gateway_url=fake.gateway_url,
            **settings,
        ),
        menu=(commands or COMMANDS).menu(),
        replies=ReplyStreams(MemoryReplyRecords(), IncrementalRender()),
    )
    bus = MemoryBus()
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry(builtin_tools()), store=store
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=policy or ChannelPolicy(modes=REGISTERED.default_modes()),
        commands=commands or COMMANDS,
        prompt_hints={"discord": discord_channel.PROMPT_HINT},
        stream_interval=stream_interval,
    )
    gateway = Gateway(adapter, bus)
    sessions = fake.ready_count
    worker_task = asyncio.create_task(worker.run(), name="test-worker")
    gateway_task = asyncio.create_task(gateway.run(), name="test-gateway")
    try:
        await unless_failed(fake.wait_ready(PATIENCE, sessions=sessions + 1), gateway_task)
        yield Serving(fake, adapter, gateway, worker, bus, store, provider)
    finally:
        await gateway.stop()
        async with asyncio.timeout(PATIENCE):
            await gateway_task
        await worker.stop(grace=PATIENCE)
        async with asyncio.timeout(PATIENCE):
            await worker_task
        await bus.close()
        await provider.aclose()


async def unless_failed(ready: Awaitable[Any], task: asyncio.Task[None]) -> None:
    """Await `ready`, but fail at once with the task's error if the task ends first."""
    waiting = asyncio.ensure_future(ready)
    done, _ = await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
    if waiting not in done:
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        task.result()
        raise AssertionError("the gateway stopped before the bot was connected")
    waiting.result()


async def reply_containing(
    fake: FakeDiscord,
    channel_id: int,
    needle: str,
    timeout: float = PATIENCE,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
) -> SentMessage:
    """The bot's message in `channel_id` whose current text contains `needle`, once there is one."""

    def found() -> SentMessage | None:
        return next((m for m in fake.messages.get(channel_id, []) if needle in m.content), None)

    await fake.until(lambda: found() is not None, f"{needle!r} in channel {channel_id}", timeout)
    message = found()
    assert message is not None
    return message


def fences_balanced(text: str) -> bool:
    """Whether every code fence opened in a message is closed in it."""
    return len(_FENCE.findall(text)) % 2 == 0


def code_blocks(texts: Sequence[str]) -> list[str]:
    """The text inside each fenced code block of the given messages, in order."""
    return [block for text in texts for block in _CODE_BLOCK.findall(text)]
