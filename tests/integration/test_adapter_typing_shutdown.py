"""No typing indicator outlives its adapter.

A typing task asks the reply records whether the answer is shown; in `serve` those records
are in the database, which is closed right after the adapters stop. A typing task that was
only cancelled, not awaited, could still be inside such a query when the database closed:
the query's cleanup then waited for a connection that was gone, and the process never
exited after SIGTERM. So when an adapter's `run()` returns, every typing task it started has
finished, however long its cancellation takes to unwind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import SecretStr

from channels.discord.adapter import DiscordAdapter, DiscordSettings
from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.envelopes import Address, Inbound, Outbound
from core.store.replies import MemoryReplyRecords, ReplyRecord
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import PATIENCE

# Loop turns a cancelled query takes to let go of its connection (closing it is a round trip
# to the driver's thread, and more): far more than the adapter's own shutdown takes.
UNWIND_TURNS = 500


class SlowToCancelRecords:
    """Reply records whose `get` stays in flight until cancelled, then unwinds slowly."""

    def __init__(self) -> None:
        self._records = MemoryReplyRecords()
        self.asking: list[asyncio.Task[Any]] = []
        self.asked = asyncio.Event()

    async def get(self, key: str) -> ReplyRecord | None:
        task = asyncio.current_task()
        assert task is not None
        self.asking.append(task)
        self.asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            for _ in range(UNWIND_TURNS):
                await asyncio.sleep(0)
            raise
        return await self._records.get(key)

    async def save(self, record: ReplyRecord) -> None:
        await self._records.save(record)

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        return self._records.hold(key)


async def _ignore(_inbound: Inbound) -> None:
    """A sink for a test that sends no messages."""


def _replies(records: SlowToCancelRecords) -> ReplyStreams:
    return ReplyStreams(records, IncrementalRender())


async def _typing_then_stop(
    adapter: TelegramAdapter | DiscordAdapter,
    records: SlowToCancelRecords,
    address: str,
    ready: Callable[[], Awaitable[object]],
) -> None:
    """Start typing in `address`, stop the adapter while a typing task is in a query, and
    check that task had finished when `run()` returned."""
    running = asyncio.create_task(adapter.run(_ignore))
    try:
        async with asyncio.timeout(PATIENCE):
            await ready()
            await adapter.deliver(Outbound(kind="typing", address=Address.parse(address)))
            await records.asked.wait()
        await adapter.stop()
        async with asyncio.timeout(PATIENCE):
            await running
    finally:
        if not running.done():
            running.cancel()
    assert records.asking
    assert all(task.done() for task in records.asking), "a typing task outlived the adapter"


async def test_telegram_typing_tasks_end_before_the_adapter_does(
    fake_telegram: FakeTelegram,
) -> None:
    fake = fake_telegram
    records = SlowToCancelRecords()
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=[],
        replies=_replies(records),
    )
    await _typing_then_stop(
        adapter, records, "telegram:555", lambda: fake.wait_idle_poll(timeout=PATIENCE)
    )


async def test_discord_typing_tasks_end_before_the_adapter_does(
    fake_discord: FakeDiscord,
) -> None:
    fake = fake_discord
    records = SlowToCancelRecords()
    adapter = DiscordAdapter(
        DiscordSettings(
            token=SecretStr(fake.token),
            api_url=fake.api_url,
            gateway_url=fake.gateway_url,
            typing_interval=0.01,  # the renewal, which asks the records, comes at once
            ready_timeout=0.05,
        ),
        menu=[],
        replies=_replies(records),
    )
    sessions = fake.ready_count
    await _typing_then_stop(
        adapter,
        records,
        f"discord:{CHANNEL}",
        lambda: fake.wait_ready(PATIENCE, sessions=sessions + 1),
    )
