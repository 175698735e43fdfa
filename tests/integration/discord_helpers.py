"""Shared pieces of the Discord channel tests: a running bot on the Discord fake, and waits.

`serving` runs the real stack in-process (`Worker` on a `MemoryBus` and `SqlStore`, a
`Gateway` around the real `DiscordAdapter`, so discord.py talks to `FakeDiscord` over its
gateway websocket and REST) and stops it cleanly. Every wait is for something the fake
observes, never for time.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from channels.attachments import DocumentReader
from channels.discord.adapter import DiscordAdapter, DiscordSettings
from channels.discord.spec import SPEC
from channels.gateway import Gateway
from core.commands import CommandRegistry
from core.policy import ChannelPolicy
from core.providers.base import Provider
from core.store.base import Store
from core.tools import Tool
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot

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
    documents: DocumentReader | None = None,
    catch_up: bool = False,
    tools: Sequence[Tool[Any]] = (),
    confirm_timeout: float | None = None,
    **options: Any,
) -> AsyncIterator[Serving]:
    """Run a worker and a Discord gateway until the block ends; `options` go to the settings.

    With `catch_up`, the adapter keeps its seen marks in `store` and catches up at start.
    `tools` and `confirm_timeout` go to `running_bot` (extra tools; the confirmation gate).
    Yields once the bot has identified and the fake has sent READY and its GUILD_CREATE.
    """
    # The fake sends its servers with READY: no need to wait 2 s for more (a stop before the
    # ready event waits for it).
    options.setdefault("ready_timeout", 0.05)
    adapter = DiscordAdapter(
        DiscordSettings(
            token=SecretStr(fake.token),
            api_url=fake.api_url,
            gateway_url=fake.gateway_url,
            **options,
        ),
        menu=(commands or COMMANDS).menu(),
        replies=local_replies(),
        seen=store if catch_up else None,
        documents=documents,
        uploads=SPEC.uploads,  # Discord's limits, as the product builds it
    )
    sessions = fake.ready_count
    async with running_bot(
        adapter,
        store,
        provider,
        ready=lambda: fake.wait_ready(PATIENCE, sessions=sessions + 1),
        policy=policy,
        commands=commands,
        stream_interval=stream_interval,
        tools=tools,
        confirm_timeout=confirm_timeout,
    ) as bot:
        yield Serving(fake, adapter, bot.gateway, bot.worker, bot.bus, store, provider)


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
