"""Only a process that can deliver to a schedule's chat fires it, over one shared store.

Two schedulers share the store the way `switchboard chat` and `switchboard serve` (or
`switchboard scheduler`) do: two connections to one SQLite file, or one Redis. The chat's
fires only `terminal` schedules onto its own bus; the other fires the chat platforms' and
leaves the terminal's due. The clock is fixed; each tick is driven by the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bots.platforms import REGISTERED
from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Address
from core.readiness import Readiness
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, Schedule
from core.scheduling.scheduler import Scheduler, SchedulerStore
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import take_waiting

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
TERMINAL = REGISTERED.addresses().parse("terminal")
TELEGRAM = Address.parse("telegram:4242")
SLACK = Address.parse("slack:C0123ABCD")


def now() -> datetime:
    return T0


@asynccontextmanager
async def two_sqlite(tmp_path: Path) -> AsyncIterator[tuple[SchedulerStore, SchedulerStore]]:
    async with AsyncExitStack() as stack:
        first = await SqlStore.open(sqlite_url(tmp_path / "shared.db"), clock=now)
        stack.push_async_callback(first.close)
        second = await SqlStore.open(sqlite_url(tmp_path / "shared.db"), clock=now)
        stack.push_async_callback(second.close)
        yield first, second


@asynccontextmanager
async def two_sql(url: str) -> AsyncIterator[tuple[SchedulerStore, SchedulerStore]]:
    async with AsyncExitStack() as stack:
        first = await SqlStore.open(url, clock=now)
        stack.push_async_callback(first.close)
        second = await SqlStore.open(url, clock=now)
        stack.push_async_callback(second.close)
        yield first, second


async def _every_minute(store: SchedulerStore, deliver_to: Address) -> Schedule:
    book = ScheduleBook(store, clock=lambda: T0 - timedelta(minutes=1))
    return await book.create(
        cadence=IntervalCadence(seconds=60, start=T0 - timedelta(minutes=1)),
        prompt=f"for {deliver_to}",
        deliver_to=deliver_to,
        owner="cli",
    )


async def _fired(mailboxes: MemoryMailboxes) -> list[str]:
    """The schedule ids of the runs put in `mailboxes`."""
    return [inbound.schedule_id or "" for inbound in await take_waiting(mailboxes)]


async def _check_both_directions(chat_store: SchedulerStore, serve_store: SchedulerStore) -> None:
    terminal = await _every_minute(chat_store, TERMINAL)
    telegram = await _every_minute(serve_store, TELEGRAM)
    slack = await _every_minute(serve_store, SLACK)
    chat_bus, serve_bus = MemoryBus(), MemoryBus()
    chat_boxes, serve_boxes = MemoryMailboxes(), MemoryMailboxes()
    chat = Scheduler(
        store=chat_store,
        book=ScheduleBook(chat_store, clock=now),
        bus=chat_bus,
        mailboxes=chat_boxes,
        readiness=Readiness(),
        clock=now,
        platforms={"terminal"},
    )
    serve = Scheduler(
        store=serve_store,
        book=ScheduleBook(serve_store, clock=now),
        bus=serve_bus,
        mailboxes=serve_boxes,
        readiness=Readiness(),
        clock=now,
        platforms=REGISTERED.served(),
    )
    try:
        # The chat fires its terminal schedule only; the others stay due, untouched.
        assert await chat.tick_once() == 1
        assert await _fired(chat_boxes) == [terminal.id]
        assert await serve_store.get_schedule(telegram.id) == telegram
        assert await serve_store.get_schedule(slack.id) == slack
        assert await chat.tick_once() == 0

        # The serving side fires the chat platforms' and leaves the terminal's alone.
        assert await serve.tick_once() == 2
        assert sorted(await _fired(serve_boxes)) == sorted([telegram.id, slack.id])
        assert await serve.tick_once() == 0
        assert [r.schedule_id for r in await chat_store.list_runs(terminal.id)] == [terminal.id]
        assert len(await chat_store.list_runs(telegram.id)) == 1

        # A terminal schedule made while no chat runs waits for one: serve never fires it.
        waiting = await _every_minute(serve_store, TERMINAL)
        assert await serve.tick_once() == 0
        assert await serve_store.list_runs(waiting.id) == []
        assert await chat.tick_once() == 1
        assert await _fired(chat_boxes) == [waiting.id]
    finally:
        await chat_bus.close()
        await serve_bus.close()


async def test_with_a_shared_sqlite_file(tmp_path: Path) -> None:
    async with two_sqlite(tmp_path) as (chat_store, serve_store):
        await _check_both_directions(chat_store, serve_store)


async def test_with_postgresql(postgres_url: str) -> None:
    async with two_sql(postgres_url) as (chat_store, serve_store):
        await _check_both_directions(chat_store, serve_store)
