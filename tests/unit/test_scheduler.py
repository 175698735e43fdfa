"""`Scheduler`: due schedules become `Inbound` work, once per occurrence.

Over a real `SqlStore` and `MemoryBus`; the clock is moved by hand and the test calls
`tick_once()` itself, so nothing here waits for time to pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Address, Inbound
from core.errors import StoreError
from core.readiness import Readiness
from core.scheduling.book import ScheduleBook
from core.scheduling.models import Cadence, IntervalCadence, OnceCadence, Schedule
from core.scheduling.scheduler import Scheduler
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import take_waiting

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
CHAT = Address.parse("telegram:4242")
MINUTE = timedelta(minutes=1)


class HandClock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock() -> HandClock:
    return HandClock()


@pytest.fixture
async def store(tmp_path: Path, clock: HandClock) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"), clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


class _Bus(MemoryBus):
    """The test's bus, with the mailboxes the scheduler puts its runs in."""

    def __init__(self) -> None:
        super().__init__()
        self.mailboxes = MemoryMailboxes()


@pytest.fixture
async def bus() -> AsyncIterator[_Bus]:
    opened = _Bus()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def book(store: SqlStore, clock: HandClock) -> ScheduleBook:
    return ScheduleBook(store, clock=clock)


def new_scheduler(store: SqlStore, bus: _Bus, clock: HandClock) -> Scheduler:
    """A scheduler (as a process starting up makes one) on the test's store, bus and clock."""
    return Scheduler(
        store=store,
        book=ScheduleBook(store, clock=clock),
        bus=bus,
        mailboxes=bus.mailboxes,
        readiness=Readiness(),
        clock=clock,
    )


@pytest.fixture
def scheduler(store: SqlStore, bus: _Bus, clock: HandClock) -> Scheduler:
    return new_scheduler(store, bus, clock)


async def make(book: ScheduleBook, cadence: Cadence | None = None, **options: Any) -> Schedule:
    options.setdefault("notify", "conditional")
    return await book.create(
        cadence=cadence or IntervalCadence(seconds=60, start=T0),
        prompt="Is it raining?",
        deliver_to=CHAT,
        owner="telegram:77",
        **options,
    )


async def fired(bus: _Bus) -> list[Inbound]:
    """Everything the scheduler put in the mailboxes so far (taken out)."""
    return await take_waiting(bus.mailboxes)


async def current(store: SqlStore, schedule: Schedule) -> Schedule:
    found = await store.get_schedule(schedule.id)
    assert found is not None
    return found


# --- firing ---------------------------------------------------------------------------------


async def test_a_due_interval_schedule_fires_once_and_moves_on(
    book: ScheduleBook,
    store: SqlStore,
    bus: _Bus,
    clock: HandClock,
    scheduler: Scheduler,
) -> None:
    made = await make(book)
    clock.set(T0 + timedelta(seconds=30))
    assert await scheduler.tick_once() == 0
    assert await fired(bus) == []

    clock.set(T0 + MINUTE)
    assert await scheduler.tick_once() == 1

    (inbound,) = await fired(bus)
    assert inbound.origin == "scheduled"
    assert inbound.schedule_id == made.id
    # Addressed to the chat the answer goes to, on behalf of the schedule's owner.
    assert inbound.address == CHAT
    assert inbound.notify == "conditional"
    assert inbound.text == "Is it raining?"
    assert (inbound.owner, inbound.user_id) == ("telegram:77", "")
    assert inbound.dedupe_key == f"scheduled:{made.id}:{inbound.run_id}"
    assert inbound.session_key == f"scheduled:{made.id}"
    (run,) = await store.list_runs(made.id)
    assert inbound.run_id == run.id
    assert (run.status, run.due_at, run.started_at) == ("running", T0 + MINUTE, T0 + MINUTE)
    after = await current(store, made)
    assert after.next_run_at == T0 + 2 * MINUTE
    assert after.status == "active"

    # The same moment again: nothing is due any more.
    assert await scheduler.tick_once() == 0
    assert await fired(bus) == []

    clock.set(T0 + 2 * MINUTE)
    assert await scheduler.tick_once() == 1
    (second,) = await fired(bus)
    assert second.run_id not in (None, inbound.run_id)
    assert second.dedupe_key != inbound.dedupe_key
    assert (await current(store, made)).next_run_at == T0 + 3 * MINUTE


async def test_a_tick_fires_every_schedule_that_is_due(
    book: ScheduleBook,
    store: SqlStore,
    bus: _Bus,
    clock: HandClock,
    scheduler: Scheduler,
) -> None:
    first = await make(book)
    second = await make(book, IntervalCadence(seconds=30, start=T0))
    later = await make(book, IntervalCadence(seconds=3600, start=T0))
    clock.set(T0 + MINUTE)

    assert await scheduler.tick_once() == 2

    # The longest due first; the hourly one is not due yet.
    assert [i.schedule_id for i in await fired(bus)] == [second.id, first.id]
    assert (await current(store, later)).next_run_at == T0 + timedelta(hours=1)


async def test_two_schedulers_at_the_same_moment_fire_an_occurrence_once(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock, tmp_path: Path
) -> None:
    made = await make(book)
    clock.set(T0 + MINUTE)
    # The second scheduler has a connection of its own to the same database, as a second
    # process would.
    other_store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"), clock=clock)
    try:
        one = new_scheduler(store, bus, clock)
        two = Scheduler(
            store=other_store,
            book=ScheduleBook(other_store, clock=clock),
            bus=bus,
            mailboxes=bus.mailboxes,
            readiness=Readiness(),
            clock=clock,
        )

        counts = await asyncio.gather(one.tick_once(), two.tick_once())

        assert sorted(counts) == [0, 1]
        (inbound,) = await fired(bus)
        assert inbound.schedule_id == made.id
        assert len(await store.list_runs(made.id)) == 1
        assert await one.tick_once() == await two.tick_once() == 0
        assert await fired(bus) == []
    finally:
        await other_store.close()


# --- downtime and misfires ------------------------------------------------------------------


async def test_skip_after_downtime_fires_nothing_and_moves_past_now(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book, misfire="skip")
    # The process was down across the due time; a new scheduler starts 10 minutes late.
    clock.set(T0 + MINUTE + 10 * MINUTE + timedelta(seconds=20))
    restarted = new_scheduler(store, bus, clock)

    assert await restarted.tick_once() == 0

    assert await fired(bus) == []
    # The runs that did not happen are on record, with why.
    (missed,) = await store.list_runs(made.id)
    assert (missed.status, missed.due_at, missed.delivery) == ("missed", T0 + MINUTE, "none")
    assert missed.error == (
        "11 runs, the first due 2026-05-01 09:01 UTC; 10 minutes late, past the 60 seconds grace"
    )
    after = await current(store, made)
    assert after.status == "active"
    assert after.next_run_at == T0 + 12 * MINUTE
    assert after.next_run_at > clock.now
    assert await restarted.tick_once() == 0


async def test_skip_still_fires_a_run_that_is_only_a_little_late(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book, IntervalCadence(seconds=3600, start=T0), misfire="skip")
    clock.set(T0 + timedelta(hours=1, seconds=45))

    assert await new_scheduler(store, bus, clock).tick_once() == 1

    (inbound,) = await fired(bus)
    (run,) = await store.list_runs(made.id)
    assert (inbound.run_id, run.due_at) == (run.id, T0 + timedelta(hours=1))


async def test_run_once_after_downtime_fires_the_newest_missed_run_once_never_a_burst(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book, misfire="run_once")
    # Ten occurrences went by while the process was down.
    clock.set(T0 + 10 * MINUTE + timedelta(seconds=20))
    restarted = new_scheduler(store, bus, clock)

    assert await restarted.tick_once() == 1
    assert await restarted.tick_once() == 0

    (inbound,) = await fired(bus)
    run, missed = sorted(await store.list_runs(made.id), key=lambda r: r.status != "running")
    assert inbound.run_id == run.id
    assert run.due_at == T0 + 10 * MINUTE  # the newest missed occurrence
    assert missed.status == "missed"
    assert missed.error == (
        "9 more runs due since 2026-05-01 09:01 UTC skipped: one late run stands for them, "
        "never a burst"
    )
    assert (await current(store, made)).next_run_at == T0 + 11 * MINUTE


async def test_run_once_fires_within_the_grace_window_and_not_beyond_it(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    hourly = IntervalCadence(seconds=3600, start=T0)
    within = await make(book, hourly, misfire="run_once")
    beyond = await make(book, hourly, misfire="run_once")
    # `beyond` missed its run by more than the default grace of 300 s; `within` by less.
    await store.save_schedule(beyond.model_copy(update={"grace_seconds": 120}))
    clock.set(T0 + timedelta(hours=1, minutes=4))

    assert await new_scheduler(store, bus, clock).tick_once() == 1

    assert [i.schedule_id for i in await fired(bus)] == [within.id]
    for schedule in (within, beyond):
        after = await current(store, schedule)
        assert (after.status, after.next_run_at) == ("active", T0 + timedelta(hours=2))


@pytest.mark.parametrize("status", ["paused", "completed", "disabled"])
async def test_schedules_that_are_not_active_never_fire(
    book: ScheduleBook,
    store: SqlStore,
    bus: _Bus,
    clock: HandClock,
    scheduler: Scheduler,
    status: str,
) -> None:
    made = await make(book)
    await store.save_schedule(made.model_copy(update={"status": status}))
    for minutes in (1, 2, 30):
        clock.set(T0 + minutes * MINUTE)
        assert await scheduler.tick_once() == 0

    assert await fired(bus) == []
    after = await current(store, made)
    assert (after.status, after.next_run_at) == (status, made.next_run_at)


async def test_a_paused_schedule_fires_again_after_resume(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock, scheduler: Scheduler
) -> None:
    made = await make(book)
    await book.set_status(made.id, "paused")
    clock.set(T0 + 5 * MINUTE + timedelta(seconds=10))
    assert await scheduler.tick_once() == 0
    await book.set_status(made.id, "active")
    assert await scheduler.tick_once() == 0  # resuming does not fire the missed runs

    clock.set(T0 + 6 * MINUTE)
    assert await scheduler.tick_once() == 1
    assert [i.schedule_id for i in await fired(bus)] == [made.id]


async def test_a_one_off_fires_once_at_its_time(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock, scheduler: Scheduler
) -> None:
    made = await make(book, OnceCadence(at=T0 + 5 * MINUTE))
    clock.set(T0 + 5 * MINUTE)

    assert await scheduler.tick_once() == 1
    clock.set(T0 + 10 * MINUTE)
    assert await scheduler.tick_once() == 0

    assert [i.schedule_id for i in await fired(bus)] == [made.id]
    after = await current(store, made)
    # Completed by the worker once the run succeeds (see the book's tests).
    assert (after.status, after.next_run_at) == ("active", None)


async def test_a_one_off_missed_beyond_its_grace_under_skip_is_disabled_unrun(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book, OnceCadence(at=T0 + 5 * MINUTE), misfire="skip")
    clock.set(T0 + 15 * MINUTE)

    assert await new_scheduler(store, bus, clock).tick_once() == 0

    assert await fired(bus) == []
    (missed,) = await store.list_runs(made.id)
    assert missed.status == "missed"
    assert missed.error == "due 2026-05-01 09:05 UTC; 10 minutes late, past the 60 seconds grace"
    after = await current(store, made)
    assert (after.status, after.next_run_at) == ("disabled", None)
    assert after.status_reason == f"its run was missed: {missed.error}"


async def test_a_one_off_runs_late_within_a_day_by_default(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    # A reminder due while nothing could fire it (no chat open, the machine asleep).
    made = await make(book, OnceCadence(at=T0 + 5 * MINUTE))
    assert (made.misfire, made.grace_seconds) == ("run_once", 86_400)
    clock.set(T0 + timedelta(hours=20))

    assert await new_scheduler(store, bus, clock).tick_once() == 1

    (inbound,) = await fired(bus)
    (run,) = await store.list_runs(made.id)
    assert (inbound.run_id, run.status, run.due_at) == (run.id, "running", T0 + 5 * MINUTE)


async def test_a_one_off_more_than_a_day_late_is_recorded_as_missed(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book, OnceCadence(at=T0 + 5 * MINUTE))
    clock.set(T0 + 5 * MINUTE + timedelta(hours=25))

    assert await new_scheduler(store, bus, clock).tick_once() == 0

    assert await fired(bus) == []
    (missed,) = await store.list_runs(made.id)
    assert missed.error == "due 2026-05-01 09:05 UTC; 25 hours late, past the 24 hours grace"
    after = await current(store, made)
    assert (after.status, after.status_reason) == (
        "disabled",
        f"its run was missed: {missed.error}",
    )


# --- a scheduler that died holding a claim -----------------------------------------------------


async def test_a_claim_left_by_a_dead_scheduler_is_moved_on_after_two_minutes(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock, scheduler: Scheduler
) -> None:
    made = await make(book)
    due = T0 + MINUTE
    # A scheduler claimed the occurrence and died before moving the schedule on.
    assert await store.mark_processed(f"schedule:{made.id}:{due.isoformat()}")

    for late in (timedelta(0), MINUTE, 2 * MINUTE - timedelta(seconds=1)):
        clock.set(due + late)
        assert await scheduler.tick_once() == 0
        assert (await current(store, made)).next_run_at == due  # maybe still being worked on

    clock.set(due + 2 * MINUTE + timedelta(seconds=5))
    assert await scheduler.tick_once() == 0
    after = await current(store, made)
    assert after.status == "active"
    assert after.next_run_at == T0 + 4 * MINUTE
    assert after.next_run_at > clock.now
    assert await fired(bus) == []

    # The schedule runs again from its next occurrence.
    clock.set(T0 + 4 * MINUTE)
    assert await scheduler.tick_once() == 1
    assert [i.schedule_id for i in await fired(bus)] == [made.id]


async def test_a_one_off_claimed_by_a_dead_scheduler_is_disabled_after_two_minutes(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock, scheduler: Scheduler
) -> None:
    due = T0 + 5 * MINUTE
    made = await make(book, OnceCadence(at=due))
    assert await store.mark_processed(f"schedule:{made.id}:{due.isoformat()}")

    clock.set(due + 3 * MINUTE)
    assert await scheduler.tick_once() == 0

    assert await fired(bus) == []
    after = await current(store, made)
    # It never ran and never will: not left "active" with nothing to run.
    assert (after.status, after.next_run_at) == ("disabled", None)
    assert after.status_reason == "its run was lost: the scheduler firing it stopped"


# --- the loop -------------------------------------------------------------------------------


async def test_run_ticks_until_stopped(
    book: ScheduleBook, store: SqlStore, bus: _Bus, clock: HandClock
) -> None:
    made = await make(book)
    clock.set(T0 + MINUTE)
    runner = Scheduler(
        store=store,
        book=ScheduleBook(store, clock=clock),
        bus=bus,
        mailboxes=bus.mailboxes,
        readiness=Readiness(),
        clock=clock,
        tick=3600,
    )
    task = asyncio.create_task(runner.run())

    assert await bus.mailboxes.woken(5.0) is not None  # the first tick

    assert [inbound.schedule_id for inbound in await fired(bus)] == [made.id]
    await runner.stop()
    await asyncio.wait_for(task, 5.0)


def test_a_scheduled_run_written_before_owner_reads_as_one_with_its_target_and_owner() -> None:
    old = {
        "type": "inbound",
        "origin": "scheduled",
        "address": {"platform": "scheduled", "bot": "scheduler", "chat": "s1"},
        "user_id": "telegram:77",
        "text": "Is it raining?",
        "schedule_id": "s1",
        "run_id": "r1",
        "deliver_to": CHAT.model_dump(),
    }
    inbound = Inbound.model_validate(old)
    assert (inbound.address, inbound.owner, inbound.user_id) == (CHAT, "telegram:77", "")
    assert inbound.session_key == "scheduled:s1"


class _AwayStore(SqlStore):
    """Fails the first `failures` looks for due schedules, like Redis while it restarts."""

    failures = 0
    refused: asyncio.Event

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        if self.failures:
            self.failures -= 1
            self.refused.set()
            raise StoreError("connection refused")
        return await super().due_schedules(now, limit=limit)


async def test_a_tick_that_cannot_reach_the_store_is_tried_again_and_marked_down(
    tmp_path: Path, bus: _Bus, clock: HandClock
) -> None:
    store = await _AwayStore.open(sqlite_url(tmp_path / "away.db"), clock=clock)
    assert isinstance(store, _AwayStore)
    try:
        made = await make(ScheduleBook(store, clock=clock))
        clock.set(T0 + MINUTE)
        store.failures, store.refused = 2, asyncio.Event()
        readiness = Readiness()
        runner = Scheduler(
            store=store,
            book=ScheduleBook(store, clock=clock),
            bus=bus,
            mailboxes=bus.mailboxes,
            readiness=readiness,
            clock=clock,
            tick=3600,
        )
        task = asyncio.create_task(runner.run())

        await asyncio.wait_for(store.refused.wait(), 5.0)
        assert (await readiness.report()).details["scheduler"] == "connection refused"
        assert await bus.mailboxes.woken(10.0) is not None

        assert [inbound.schedule_id for inbound in await fired(bus)] == [made.id]
        assert (await readiness.report()).ready
        await runner.stop()
        await asyncio.wait_for(task, 5.0)
    finally:
        await store.close()
