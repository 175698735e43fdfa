"""Shared pieces of the Telegram channel tests: a running bot on the Bot API fake, and waits.

`serving` runs the real stack in-process (`Worker` on a `MemoryBus` and `SqlStore`, a
`Gateway` around the real `TelegramAdapter`, so python-telegram-bot talks to `FakeTelegram`)
and stops it cleanly. Every wait here is for something the fake observes, never for time.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from channels.attachments import DocumentReader
from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from channels.telegram.spec import SPEC
from core.commands import CommandRegistry
from core.events import Finished, ModelEvent, TextDelta
from core.policy import ChannelPolicy
from core.providers.base import ModelRequest, Provider
from core.store.base import Store
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes.telegram_api import Call, FakeTelegram, SentMessage
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot

# The bot's key in session keys: the numeric part of the fake's default token.
BOT_KEY = "123456789"

MENU = COMMANDS.menu()

_PRE = re.compile(r"<pre>(?:<code[^>]*>)?(.*?)(?:</code>)?</pre>", re.DOTALL)


@dataclass
class Serving:
    """One running bot: the parts a test looks at."""

    fake: FakeTelegram
    adapter: TelegramAdapter
    gateway: Gateway
    worker: Worker
    bus: MemoryBus
    store: Store
    provider: Provider


@asynccontextmanager
async def serving(
    fake: FakeTelegram,
    store: Store,
    provider: Provider,
    *,
    policy: ChannelPolicy | None = None,
    commands: CommandRegistry | None = None,
    stream_interval: float = 0.05,
    documents: DocumentReader | None = None,
    **options: Any,
) -> AsyncIterator[Serving]:
    """Run a worker and a Telegram gateway until the block ends; `options` go to the settings.

    Yields once the bot is listening: its first `getUpdates` is held, or, for a webhook,
    `setWebhook` was called (the adapter's server is up before it calls).
    """
    settings: dict[str, Any] = {"poll_timeout": 1} | options
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, **settings),
        menu=(commands or COMMANDS).menu(),
        replies=local_replies(),
        documents=documents,
        uploads=SPEC.uploads,  # the Bot API's limits, as the product builds it
    )

    def ready() -> Awaitable[Any]:
        if adapter.settings.webhook_url:
            return fake.wait_for_call("setWebhook", timeout=PATIENCE)
        return fake.wait_idle_poll(timeout=PATIENCE)

    async with running_bot(
        adapter,
        store,
        provider,
        ready=ready,
        policy=policy,
        commands=commands,
        stream_interval=stream_interval,
    ) as bot:
        yield Serving(fake, adapter, bot.gateway, bot.worker, bot.bus, store, provider)


async def until(
    fake: FakeTelegram,
    ready: Callable[[], bool],
    what: str,
    timeout: float = PATIENCE,  # noqa: ASYNC109 - a test's deadline, named like asyncio's
) -> None:
    """Wait until `ready()` holds, re-checked whenever the fake records a call or a change."""
    try:
        async with asyncio.timeout(timeout):
            await fake._changes.until(ready)  # the fake's own change signal; no polling
    except TimeoutError:
        raise AssertionError(
            f"timed out waiting for {what}; calls: {calls_summary(fake)}"
        ) from None


async def reply_containing(
    fake: FakeTelegram,
    chat_id: int,
    needle: str,
    timeout: float = PATIENCE,  # noqa: ASYNC109
) -> SentMessage:
    """The bot's message in `chat_id` whose current text contains `needle`, once there is one."""

    def found() -> SentMessage | None:
        return next((m for m in fake.messages.get(chat_id, []) if needle in m.text), None)

    await until(fake, lambda: found() is not None, f"{needle!r} in chat {chat_id}", timeout)
    message = found()
    assert message is not None
    return message


def calls_to(fake: FakeTelegram, method: str, chat_id: int | None = None) -> list[Call]:
    """The recorded calls of `method` (to `chat_id`, when given), in order."""
    return [
        call
        for call in fake.calls
        if call.method.lower() == method.lower()
        and (chat_id is None or call.params.get("chat_id") == chat_id)
    ]


def calls_summary(fake: FakeTelegram) -> list[str]:
    """The methods called so far, with their chat, for failure messages."""
    return [f"{c.method}({c.params.get('chat_id', '')})" for c in fake.calls]


def pre_contents(texts: Sequence[str]) -> list[str]:
    """The text inside each `<pre>` block of the given HTML messages, unescaped, in order."""
    return [html.unescape(block) for text in texts for block in _PRE.findall(text)]


class PacedProvider:
    """Streams `pieces` as text deltas, waiting for `gates[i]` before piece `i + 1`, and for
    the last gate before ending the answer.

    A test opens a gate after seeing what the previous piece did at the fake, so the stream
    advances in step with the test instead of with the clock.
    """

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self.gates = [asyncio.Event() for _ in self.pieces]
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "paced"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The pieces, each after its gate opened, then the end of the answer."""
        self.requests.append(request)
        for index, piece in enumerate(self.pieces):
            if index:
                await self.gates[index - 1].wait()
            yield TextDelta(text=piece)
        await self.gates[-1].wait()
        yield Finished(stop_reason="end_turn")
