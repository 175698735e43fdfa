"""`ScheduleBook`: creating schedules and the outcome rules of their runs.

Over a real `SqlStore` with a clock moved by hand: every time here is a fixed datetime.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Address, new_id
from core.errors import StoreError
from core.scheduling.book import ScheduleBook
from core.scheduling.cadence import CadenceError, make_cron
from core.scheduling.models import (
    Cadence,
    IntervalCadence,
    NotifyPolicy,
    OnceCadence,
    Schedule,
    ScheduleRun,
)

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
CHAT = Address.parse("telegram:4242")
EVERY_MINUTE = IntervalCadence(seconds=60, start=T0)


class HandClock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


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


@pytest.fixture
def book(store: SqlStore, clock: HandClock) -> ScheduleBook:
    return ScheduleBook(store, clock=clock)


async def make(
    book: ScheduleBook, cadence: Cadence = EVERY_MINUTE, *, notify: NotifyPolicy = "always"
) -> Schedule:
    return await book.create(
        cadence=cadence, prompt="  Is it raining?  ", deliver_to=CHAT, owner="cli", notify=notify
    )


async def start_run(book: ScheduleBook, schedule: Schedule, clock: HandClock) -> ScheduleRun:
    """A run as the scheduler records it when it fires."""
    run = ScheduleRun(
        id=new_id()[:12],
        schedule_id=schedule.id,
        due_at=schedule.next_run_at or clock(),
        started_at=clock(),
    )
    await book.store.save_run(run)
    return run


async def succeed(
    book: ScheduleBook, schedule: Schedule, clock: HandClock, output: str
) -> list[str]:
    run = await start_run(book, schedule, clock)
    notes = await book.finish(schedule.id, run.id, succeeded=True, output=output)
    assert all(n.address == schedule.deliver_to for n in notes)
    return [n.text for n in notes]


async def fail(book: ScheduleBook, schedule: Schedule, clock: HandClock) -> list[str]:
    run = await start_run(book, schedule, clock)
    notes = await book.finish(
        schedule.id, run.id, succeeded=False, output="", error="provider auth: bad key"
    )
    assert all(n.address == schedule.deliver_to for n in notes)
    return [n.text for n in notes]


async def stored(book: ScheduleBook, schedule: Schedule) -> Schedule:
    return await book.get(schedule.id)


# --- create -------------------------------------------------------------------------------


async def test_create_stores_an_active_schedule_due_one_interval_later(
    book: ScheduleBook,
) -> None:
    made = await make(book)

    assert made.status == "active"
    assert made.next_run_at == T0 + timedelta(seconds=60)
    assert made.prompt == "Is it raining?"
    assert (made.created_at, made.updated_at) == (T0, T0)
    assert (made.consecutive_failures, made.misfire, made.notify) == (0, "skip", "always")
    assert await stored(book, made) == made
    assert await book.store.list_schedules() == [made]


async def test_create_a_once_schedule_due_at_its_time(book: ScheduleBook) -> None:
    at = T0 + timedelta(hours=2)
    made = await make(book, OnceCadence(at=at))
    assert made.next_run_at == at


async def test_create_a_cron_schedule_due_at_its_next_time(book: ScheduleBook) -> None:
    made = await make(book, make_cron("30 10 * * *", "Europe/Paris"))
    # 10:30 in Paris (CEST, UTC+2) is 08:30 UTC: already past on May 1st, so May 2nd.
    assert made.next_run_at == datetime(2026, 5, 2, 8, 30, tzinfo=UTC)


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=1), timedelta(days=3)])
async def test_create_refuses_a_once_schedule_that_is_not_in_the_future(
    book: ScheduleBook, late: timedelta
) -> None:
    with pytest.raises(CadenceError, match="past"):
        await make(book, OnceCadence(at=T0 - late))
    assert await book.store.list_schedules() == []


async def test_get_names_an_unknown_schedule(book: ScheduleBook) -> None:
    with pytest.raises(StoreError, match="nope"):
        await book.get("nope")


# --- delivery per notification policy -------------------------------------------------------


async def test_always_delivers_the_answer(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book, notify="always")
    assert await succeed(book, made, clock, "  It is sunny.\n") == ["It is sunny."]


async def test_always_has_nothing_to_deliver_for_an_empty_answer(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book, notify="always")
    assert await succeed(book, made, clock, "  \n") == []


@pytest.mark.parametrize(
    ("output", "delivered"),
    [
        ("[NOTIFY] rain today", ["rain today"]),
        ("\n[NOTIFY]   rain today\n", ["rain today"]),
        ("all clear", []),
        ("No rain. [NOTIFY] only at the start counts", []),
        ("[NOTIFY]", []),
    ],
)
async def test_conditional_delivers_only_answers_starting_with_the_marker(
    book: ScheduleBook, clock: HandClock, output: str, delivered: list[str]
) -> None:
    made = await make(book, notify="conditional")
    assert await succeed(book, made, clock, output) == delivered
    (run,) = await book.store.list_runs(made.id)
    # Sent to the chat's gateway; delivered only once its receipt says so.
    assert run.delivery == ("pending" if delivered else "none")
    assert not run.delivered
    assert run.output == output  # the record keeps the whole answer


async def test_never_delivers_nothing(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book, notify="never")
    assert await succeed(book, made, clock, "[NOTIFY] rain today") == []
    (run,) = await book.store.list_runs(made.id)
    assert (run.status, run.delivered, run.output) == ("succeeded", False, "[NOTIFY] rain today")


# --- lifecycle ------------------------------------------------------------------------------


async def test_a_once_schedule_completes_after_its_run_succeeds(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book, OnceCadence(at=T0 + timedelta(minutes=5)))
    clock.advance(minutes=5)
    assert await succeed(book, made, clock, "done") == ["done"]
    after = await stored(book, made)
    assert (after.status, after.updated_at) == ("completed", clock.now)


async def test_a_repeating_schedule_stays_active_after_a_success(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    await succeed(book, made, clock, "done")
    assert (await stored(book, made)).status == "active"


async def test_a_run_of_a_paused_schedule_leaves_it_paused(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    await book.set_status(made.id, "paused")
    await succeed(book, made, clock, "done")
    assert (await stored(book, made)).status == "paused"


@pytest.mark.parametrize("policy", ["always", "conditional", "never"])
async def test_failures_are_counted_told_at_three_and_disable_at_five(
    book: ScheduleBook, clock: HandClock, policy: NotifyPolicy
) -> None:
    made = await make(book, notify=policy)
    seen: list[list[str]] = []
    counts: list[int] = []
    for _ in range(5):
        clock.advance(minutes=1)
        seen.append(await fail(book, made, clock))
        counts.append((await stored(book, made)).consecutive_failures)

    assert counts == [1, 2, 3, 4, 5]
    assert [len(notes) for notes in seen] == [0, 0, 1, 0, 1]
    (notice,) = seen[2]
    assert made.id in notice
    assert "failed 3 times in a row" in notice
    assert "provider auth: bad key" in notice
    (final,) = seen[4]
    assert made.id in final
    assert "failed 5 time(s) in a row and is now disabled" in final
    assert "provider auth: bad key" in final
    after = await stored(book, made)
    assert after.status == "disabled"
    assert after.status_reason == "5 runs in a row failed; last error: provider auth: bad key"
    assert await book.store.due_schedules(clock.now + timedelta(days=1)) == []


async def test_notice_and_disable_thresholds_are_settings(
    store: SqlStore, clock: HandClock
) -> None:
    book = ScheduleBook(store, clock=clock, notify_after=1, disable_after=2)
    made = await make(book)
    assert len(await fail(book, made, clock)) == 1
    assert (await stored(book, made)).status == "active"
    assert len(await fail(book, made, clock)) == 1
    assert (await stored(book, made)).status == "disabled"


async def test_a_success_resets_the_failure_count(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book)
    for _ in range(2):
        assert await fail(book, made, clock) == []
    await succeed(book, made, clock, "fine again")
    assert (await stored(book, made)).consecutive_failures == 0

    # Counting starts over: the notice comes at the third failure after the success.
    assert await fail(book, made, clock) == []
    assert await fail(book, made, clock) == []
    assert len(await fail(book, made, clock)) == 1
    assert (await stored(book, made)).consecutive_failures == 3


async def test_a_failed_once_schedule_is_disabled_at_once_with_a_notice(
    book: ScheduleBook, clock: HandClock
) -> None:
    # A one-off has no next run that could succeed, so one failure is final.
    made = await make(book, OnceCadence(at=T0 + timedelta(minutes=1)))
    clock.advance(minutes=1)
    (notice,) = await fail(book, made, clock)
    assert "is now disabled" in notice
    after = await stored(book, made)
    assert after.status == "disabled"
    assert after.status_reason == "its run failed; last error: provider auth: bad key"


# --- late runs ----------------------------------------------------------------------------


async def test_a_one_off_runs_late_within_a_day_and_a_repeating_one_skips_by_default(
    book: ScheduleBook,
) -> None:
    once = await make(book, OnceCadence(at=T0 + timedelta(minutes=1)))
    every = await make(book)
    assert (once.misfire, once.grace_seconds) == ("run_once", 24 * 3600)
    assert every.misfire == "skip"
    chosen = await book.create(
        cadence=OnceCadence(at=T0 + timedelta(minutes=1)),
        prompt="p",
        deliver_to=CHAT,
        owner="cli",
        misfire="skip",
    )
    assert chosen.misfire == "skip"


async def test_an_answer_that_comes_late_says_when_it_was_due(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(
        book, OnceCadence(at=datetime(2026, 5, 1, 17, 30, tzinfo=UTC), timezone="Europe/Paris")
    )
    # Fired 12 minutes after its time (nothing was running to fire it at 17:30 UTC).
    clock.now = datetime(2026, 5, 1, 17, 42, tzinfo=UTC)
    assert await succeed(book, made, clock, "Take the bread out!") == [
        "(due at 19:30 Europe/Paris, 12 minutes ago)\nTake the bread out!"
    ]
    (run,) = await book.store.list_runs(made.id)
    assert run.output == "Take the bread out!"  # the record keeps the answer as it was


async def test_an_answer_on_time_has_no_note(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book, OnceCadence(at=T0 + timedelta(minutes=1)))
    clock.advance(minutes=1, seconds=30)
    assert await succeed(book, made, clock, "Take the bread out!") == ["Take the bread out!"]


async def test_finishing_a_run_of_a_removed_schedule_delivers_nothing(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    run = await start_run(book, made, clock)
    assert await book.store.delete_schedule(made.id)
    assert await book.finish(made.id, run.id, succeeded=True, output="late") == []
    assert await book.store.get_schedule(made.id) is None


# --- run history ----------------------------------------------------------------------------


async def test_a_successful_run_is_recorded_with_its_outcome(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    clock.advance(minutes=1)
    run = await start_run(book, made, clock)
    clock.advance(seconds=3)
    await book.finish(
        made.id, run.id, succeeded=True, output="It is sunny.", duration_ms=2950.5, cost_usd=0.0012
    )

    (recorded,) = await book.store.list_runs(made.id)
    assert (
        recorded.model_dump()
        == run.model_copy(
            update={
                "finished_at": clock.now,
                "status": "succeeded",
                "output": "It is sunny.",
                "error": "",
                "delivered": False,
                "delivery": "pending",
                "duration_ms": 2950.5,
                "cost_usd": 0.0012,
            }
        ).model_dump()
    )
    assert recorded.due_at == T0 + timedelta(minutes=1)


async def test_a_failed_run_is_recorded_with_its_error(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    await fail(book, made, clock)
    (recorded,) = await book.store.list_runs(made.id)
    assert (recorded.status, recorded.error, recorded.output, recorded.delivered) == (
        "failed",
        "provider auth: bad key",
        "",
        False,
    )
    assert recorded.finished_at == clock.now
    assert recorded.cost_usd is None


async def test_run_history_keeps_the_newest_runs(store: SqlStore, clock: HandClock) -> None:
    book = ScheduleBook(store, clock=clock, keep_runs=3)
    made = await make(book)
    started: list[str] = []
    for number in range(6):
        clock.advance(minutes=1)
        run = await start_run(book, made, clock)
        started.append(run.id)
        await book.finish(made.id, run.id, succeeded=True, output=f"answer {number}")

    runs = await store.list_runs(made.id, limit=100)
    assert [r.id for r in runs] == started[:2:-1]
    assert [r.output for r in runs] == ["answer 5", "answer 4", "answer 3"]
    assert all(r.status == "succeeded" for r in runs)


# --- pause and resume -----------------------------------------------------------------------


async def test_pause_stops_a_schedule_from_being_due(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book)
    clock.advance(seconds=30)
    paused = await book.set_status(made.id, "paused")

    assert (paused.status, paused.updated_at) == ("paused", clock.now)
    assert paused.next_run_at == made.next_run_at
    assert await stored(book, made) == paused
    assert await book.store.due_schedules(T0 + timedelta(hours=1)) == []


async def test_resume_starts_from_the_next_occurrence_after_now(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book)
    await fail(book, made, clock)
    await fail(book, made, clock)
    await book.set_status(made.id, "paused")
    clock.advance(minutes=10, seconds=30)

    resumed = await book.set_status(made.id, "active")

    assert resumed.status == "active"
    # On the one-minute grid started at T0: the first point after 10m30s is 11m.
    assert resumed.next_run_at == T0 + timedelta(minutes=11)
    assert resumed.next_run_at > clock.now
    assert resumed.consecutive_failures == 0
    assert await stored(book, made) == resumed
    assert await book.store.due_schedules(clock.now) == []
    assert await book.store.due_schedules(T0 + timedelta(minutes=11)) == [resumed]


async def test_resume_brings_back_a_disabled_schedule(book: ScheduleBook, clock: HandClock) -> None:
    made = await make(book)
    for _ in range(5):
        await fail(book, made, clock)
    assert (await stored(book, made)).status == "disabled"
    clock.advance(minutes=2, seconds=1)

    resumed = await book.set_status(made.id, "active")

    assert (resumed.status, resumed.consecutive_failures) == ("active", 0)
    assert resumed.next_run_at == T0 + timedelta(minutes=3)


async def test_resume_of_a_one_off_keeps_its_time_while_it_is_ahead(
    book: ScheduleBook, clock: HandClock
) -> None:
    at = T0 + timedelta(hours=1)
    made = await make(book, OnceCadence(at=at))
    await book.set_status(made.id, "paused")
    clock.advance(minutes=30)
    assert (await book.set_status(made.id, "active")).next_run_at == at


async def test_resume_of_a_one_off_whose_time_passed_is_refused(
    book: ScheduleBook, clock: HandClock
) -> None:
    made = await make(book, OnceCadence(at=T0 + timedelta(hours=1)))
    paused = await book.set_status(made.id, "paused")
    clock.advance(hours=1, seconds=1)

    with pytest.raises(CadenceError, match="past"):
        await book.set_status(made.id, "active")
    assert await stored(book, made) == paused


async def test_set_status_of_an_unknown_schedule_fails(book: ScheduleBook) -> None:
    with pytest.raises(StoreError, match="nope"):
        await book.set_status("nope", "paused")


# --- one owner of the outcome rules ----------------------------------------------------------


async def test_lost_answers_and_failed_runs_count_toward_one_failure_rule(
    store: SqlStore, clock: HandClock
) -> None:
    book = ScheduleBook(store, clock=clock, notify_after=2, disable_after=3)
    made = await make(book)
    answered = [await start_run(book, made, clock) for _ in range(2)]
    for run in answered:
        assert await book.finish(made.id, run.id, succeeded=True, output="Rain at noon.")
    assert (await stored(book, made)).consecutive_failures == 0

    # Their answers never arrive: each counts as a failure, the second is the alert.
    first = await book.record_delivery(
        made.id, answered[0].id, state="failed", detail="bot was blocked", at=clock.now
    )
    second = await book.record_delivery(
        made.id, answered[1].id, state="dead_lettered", detail="", at=clock.now
    )
    # A late receipt saying an answer did arrive counts nothing, nor resets the count.
    assert (
        await book.record_delivery(
            made.id, answered[1].id, state="delivered", detail="m-1", at=clock.advance(seconds=1)
        )
        is None
    )
    # Then a run fails: the third failure in a row, whichever kind, disables the schedule.
    disabled = await fail(book, made, clock)

    assert first is None
    assert second is not None and second.kind == "alert"
    assert second.text == (
        f"Scheduled task {made.id} could not be delivered or run 2 times in a row. "
        "Last error: dead lettered"
    )
    assert disabled == [
        f"Scheduled task {made.id} failed 3 time(s) in a row and is now disabled. "
        "Last error: provider auth: bad key"
    ]
    after = await stored(book, made)
    assert (after.consecutive_failures, after.status) == (3, "disabled")
    runs = {run.id: run for run in await store.list_runs(made.id)}
    assert runs[answered[0].id].delivery == "failed"
    assert runs[answered[1].id].delivery == "delivered"


def test_only_the_book_writes_runs_and_outcomes() -> None:
    """The scheduler, the worker and the receipt desk report to `ScheduleBook`; no other
    product module saves a run or a schedule's state, or records a delivery on a run."""
    root = Path(__file__).resolve().parents[2]
    # A store's writing methods, called on anything but the book itself.
    writes = re.compile(r"(?<!book)\.(save_run|save_schedule|record_delivery|prune_runs)\(")
    owner = root / "core" / "scheduling" / "book.py"
    writers = {
        str(path.relative_to(root))
        for package in ("core", "channels", "bots")
        for path in (root / package).rglob("*.py")
        if path != owner
        and not path.is_relative_to(root / "core" / "store")
        and writes.search(path.read_text(encoding="utf-8"))
    }
    assert writers == set()
