"""Telegram is told an update was received (the next `getUpdates` offset) only once the
adapter's sink has stored it (the webhook: answers 200 only then); an update the sink failed to
store comes again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.envelopes import Inbound
from core.errors import BusError
from core.store.replies import MemoryReplyRecords
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS

DM = 777
SECRET = "s3cret-webhook-token"


class _Sink:
    """Stores what it is given; fails the first `failures` calls."""

    def __init__(self, failures: int = 0) -> None:
        self.stored: list[Inbound] = []
        self.calls = 0
        self.failures = failures
        self.changed = asyncio.Event()

    async def __call__(self, inbound: Inbound) -> None:
        self.calls += 1
        self.changed.set()
        if self.failures:
            self.failures -= 1
            raise BusError("the store is away")
        self.stored.append(inbound)

    async def until_stored(self, count: int) -> None:
        while len(self.stored) < count:
            self.changed.clear()
            await self.changed.wait()


@asynccontextmanager
async def _running(
    fake: FakeTelegram, sink: _Sink, *, webhook: bool = False
) -> AsyncIterator[TelegramAdapter]:
    hook: dict[str, object] = (
        {
            "webhook_url": "http://127.0.0.1/tg-hook",
            "webhook_secret": SecretStr(SECRET),
            "webhook_host": "127.0.0.1",
            "webhook_port": 0,
        }
        if webhook
        else {}
    )
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1, **hook),
        menu=COMMANDS.menu(),
        replies=ReplyStreams(MemoryReplyRecords(), IncrementalRender()),
    )
    running = asyncio.create_task(adapter.run(sink))
    try:
        if webhook:
            await fake.wait_for_call("setWebhook", timeout=10)
        else:
            await fake.wait_idle_poll(timeout=10)
        yield adapter
    finally:
        await adapter.stop()
        await running


async def test_an_update_is_confirmed_after_it_was_stored(fake_telegram: FakeTelegram) -> None:
    sink = _Sink()
    async with _running(fake_telegram, sink):
        fake_telegram.private_text(DM, "keep me")
        await asyncio.wait_for(sink.until_stored(1), 10)
        await fake_telegram.wait_idle_poll(timeout=10)  # the next poll confirmed it
    assert [inbound.text for inbound in sink.stored] == ["keep me"]


async def test_an_update_that_could_not_be_stored_comes_again(
    fake_telegram: FakeTelegram,
) -> None:
    sink = _Sink(failures=1)
    async with _running(fake_telegram, sink):
        fake_telegram.private_text(DM, "try again")
        fake_telegram.private_text(DM, "and then this")
        await asyncio.wait_for(sink.until_stored(2), 10)
    assert sink.calls == 3
    assert [inbound.text for inbound in sink.stored] == ["try again", "and then this"]


async def test_the_webhook_answers_200_only_once_the_update_is_stored(
    fake_telegram: FakeTelegram,
) -> None:
    sink = _Sink(failures=1)
    async with _running(fake_telegram, sink, webhook=True) as adapter:
        url = f"http://127.0.0.1:{adapter.webhook_port}/tg-hook"
        update = fake_telegram.private_text(DM, "through the hook")
        assert await fake_telegram.post_webhook(url, update, secret=SECRET) == 503
        assert sink.stored == []
        assert await fake_telegram.post_webhook(url, update, secret=SECRET) == 200
        assert [inbound.text for inbound in sink.stored] == ["through the hook"]
