"""The schedules contract (`ScheduleStore`): schedules and their runs.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import (
    Cadence,
    CronCadence,
    IntervalCadence,
    OnceCadence,
    RunStatus,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
)
from core.store import (
    ScheduleStore,
    Store,
)
from tests.contract.store_support import START

# Schedules and their runs

HOUR = timedelta(hours=1)
TELEGRAM_CHAT = Address(platform="telegram", chat="42")


def _schedule(
    schedule_id: str = "sched-1",
    *,
    owner: str = "telegram:7",
    deliver_to: Address = TELEGRAM_CHAT,
    status: ScheduleStatus = "active",
    next_run_at: datetime | None = START,
    created_at: datetime = START,
    cadence: Cadence | None = None,
) -> Schedule:
    return Schedule(
        id=schedule_id,
        cadence=cadence if cadence is not None else IntervalCadence(seconds=3600, start=START),
        prompt="What is on my calendar today?",
        deliver_to=deliver_to,
        owner=owner,
        status=status,
        next_run_at=next_run_at,
        created_at=created_at,
        updated_at=created_at,
    )


def _run(
    run_id: str,
    *,
    schedule_id: str = "sched-1",
    started_at: datetime = START,
    status: RunStatus = "running",
) -> ScheduleRun:
    return ScheduleRun(
        id=run_id,
        schedule_id=schedule_id,
        due_at=started_at,
        started_at=started_at,
        status=status,
    )


async def test_every_cadence_and_schedule_field_round_trips(store: ScheduleStore) -> None:
    plus_two = datetime.fromisoformat("2025-03-01T14:30:00.123456+02:00")
    cadences: list[Cadence] = [
        OnceCadence(at=plus_two),
        IntervalCadence(seconds=90, start=START - HOUR),
        CronCadence(expression="30 8 * * 1-5", timezone="Europe/Berlin"),
    ]
    saved = [
        Schedule(
            id=f"sched-{cadence.kind}",
            cadence=cadence,
            prompt=f"Remind me ({cadence.kind})",
            deliver_to=Address(platform="slack", bot="work", chat="C1", thread="T9"),
            notify="conditional",
            owner="slack:U1",
            owner_is_admin=True,
            status="paused",
            next_run_at=plus_two + HOUR,
            misfire="run_once",
            grace_seconds=45,
            consecutive_failures=2,
            created_at=START + i * HOUR,
            updated_at=START + (i + 1) * HOUR,
        )
        for i, cadence in enumerate(cadences)
    ]
    for schedule in saved:
        await store.save_schedule(schedule)

    for schedule in saved:
        found = await store.get_schedule(schedule.id)
        assert found == schedule
        assert found is not None and found.cadence.kind == schedule.cadence.kind
    assert await store.list_schedules() == saved
    assert await store.get_schedule("nosuchsched") is None


async def test_saving_a_schedule_again_replaces_it(store: ScheduleStore) -> None:
    first = _schedule(owner="telegram:7")
    await store.save_schedule(first)
    changed = first.model_copy(
        update={
            "owner": "telegram:8",
            "prompt": "Something else",
            "cadence": CronCadence(expression="0 9 * * *", timezone="Asia/Tokyo"),
            "updated_at": START + HOUR,
        }
    )

    await store.save_schedule(changed)

    assert await store.get_schedule(first.id) == changed
    assert await store.list_schedules() == [changed]
    assert await store.list_schedules(owner="telegram:7") == []
    assert await store.list_schedules(owner="telegram:8") == [changed]


async def test_list_schedules_oldest_first_by_owner_and_by_delivery(store: ScheduleStore) -> None:
    in_thread = Address(platform="telegram", chat="42", thread="topic-1")
    other_chat = Address(platform="telegram", chat="43")
    other_platform = Address(platform="slack", chat="42")
    # Saved out of creation order: listing orders by `created_at`, not by when it was saved.
    c = _schedule("c", owner="telegram:7", created_at=START + 2 * HOUR)
    a = _schedule("a", owner="telegram:7", created_at=START)
    d = _schedule("d", owner="telegram:9", deliver_to=in_thread, created_at=START + 3 * HOUR)
    b = _schedule("b", owner="telegram:9", deliver_to=other_chat, created_at=START + HOUR)
    e = _schedule("e", owner="cli", deliver_to=other_platform, created_at=START + 4 * HOUR)
    for schedule in (c, a, d, b, e):
        await store.save_schedule(schedule)

    assert await store.list_schedules() == [a, b, c, d, e]
    assert await store.list_schedules(owner="telegram:7") == [a, c]
    assert await store.list_schedules(owner="telegram:9") == [b, d]
    assert await store.list_schedules(owner="nobody") == []
    assert await store.list_schedules(deliver_to=TELEGRAM_CHAT) == [a, c]
    # The thread tells deliveries apart; the bot does not.
    assert await store.list_schedules(deliver_to=in_thread) == [d]
    other_bot = TELEGRAM_CHAT.model_copy(update={"bot": "helper"})
    assert await store.list_schedules(deliver_to=other_bot) == [a, c]
    assert await store.list_schedules(deliver_to=other_platform) == [e]
    assert await store.list_schedules(owner="telegram:9", deliver_to=other_chat) == [b]
    assert await store.list_schedules(owner="telegram:7", deliver_to=other_chat) == []


async def test_list_schedules_of_an_empty_store_is_empty(store: ScheduleStore) -> None:
    assert await store.list_schedules() == []
    assert await store.due_schedules(START) == []


async def test_delete_schedule_removes_it_with_its_runs(store: ScheduleStore) -> None:
    doomed = _schedule("doomed")
    kept = _schedule("kept")
    for schedule in (doomed, kept):
        await store.save_schedule(schedule)
        await store.save_run(_run(f"{schedule.id}-run", schedule_id=schedule.id))

    assert await store.delete_schedule("doomed") is True

    assert await store.get_schedule("doomed") is None
    assert await store.list_schedules() == [kept]
    assert await store.list_schedules(owner=doomed.owner) == [kept]
    assert await store.due_schedules(START) == [kept]
    assert await store.list_runs("doomed") == []
    assert [r.id for r in await store.list_runs("kept")] == ["kept-run"]
    assert await store.delete_schedule("doomed") is False
    assert await store.delete_schedule("nosuchsched") is False
    # The id can be used again, and starts without the old runs.
    await store.save_schedule(doomed)
    assert await store.list_runs("doomed") == []


async def test_due_schedules_are_active_and_not_after_now(store: ScheduleStore) -> None:
    now = START + HOUR
    due = [
        _schedule("at-now", next_run_at=now),
        _schedule("earlier", next_run_at=now - timedelta(microseconds=1)),
        _schedule("long-ago", next_run_at=START - 24 * HOUR),
    ]
    not_due = [
        _schedule("later", next_run_at=now + timedelta(microseconds=1)),
        _schedule("no-next-run", next_run_at=None, status="completed"),
        _schedule("active-without-next-run", next_run_at=None),
        _schedule("paused", status="paused"),
        _schedule("completed", status="completed"),
        _schedule("disabled", status="disabled"),
    ]
    for schedule in [*not_due, *due]:
        await store.save_schedule(schedule)

    found = await store.due_schedules(now)

    assert [s.id for s in found] == ["long-ago", "earlier", "at-now"]
    assert found[0] == due[2]


async def test_due_schedules_at_the_same_time_go_oldest_first_up_to_limit(
    store: Store,
) -> None:
    ids = ["young", "old", "middle", "earliest-due"]
    created = [START + 3 * HOUR, START, START + HOUR, START + 2 * HOUR]
    due_at = [START, START, START, START - HOUR]
    for schedule_id, created_at, next_run_at in zip(ids, created, due_at, strict=True):
        await store.save_schedule(
            _schedule(schedule_id, created_at=created_at, next_run_at=next_run_at)
        )

    assert [s.id for s in await store.due_schedules(START)] == [
        "earliest-due",
        "old",
        "middle",
        "young",
    ]
    assert [s.id for s in await store.due_schedules(START, limit=2)] == ["earliest-due", "old"]
    assert await store.due_schedules(START, limit=0) == []


async def test_saving_a_schedule_again_moves_it_in_and_out_of_due(store: ScheduleStore) -> None:
    schedule = _schedule(next_run_at=START)
    await store.save_schedule(schedule)
    assert [s.id for s in await store.due_schedules(START)] == [schedule.id]

    await store.save_schedule(schedule.model_copy(update={"status": "paused"}))
    assert await store.due_schedules(START) == []

    resumed = schedule.model_copy(update={"next_run_at": START + HOUR})
    await store.save_schedule(resumed)
    assert await store.due_schedules(START) == []
    assert await store.due_schedules(START + HOUR) == [resumed]

    await store.save_schedule(resumed.model_copy(update={"next_run_at": None}))
    assert await store.due_schedules(START + 24 * HOUR) == []


async def test_due_schedules_compares_instants_across_time_zones(store: ScheduleStore) -> None:
    # 13:30+02:00 is 11:30 UTC: due at noon UTC, before a schedule due at 11:45 UTC.
    east = _schedule("east", next_run_at=datetime.fromisoformat("2025-03-01T13:30:00+02:00"))
    utc = _schedule("utc", next_run_at=START - timedelta(minutes=15))
    for schedule in (utc, east):
        await store.save_schedule(schedule)

    found = await store.due_schedules(datetime.fromisoformat("2025-03-01T07:00:00-05:00"))

    assert [s.id for s in found] == ["east", "utc"]


async def test_a_run_is_saved_replaced_and_listed(store: ScheduleStore) -> None:
    await store.save_schedule(_schedule())
    running = _run("run-1")
    await store.save_run(running)
    assert await store.list_runs("sched-1") == [running]

    finished = running.model_copy(
        update={
            "status": "succeeded",
            "finished_at": START + timedelta(seconds=12),
            "output": "Three meetings.",
            "delivered": True,
            "duration_ms": 12000.5,
            "cost_usd": 0.0042,
        }
    )
    await store.save_run(finished)

    assert await store.list_runs("sched-1") == [finished]
    failed = _run("run-2", started_at=START + HOUR, status="failed").model_copy(
        update={"error": "provider down", "cost_usd": None}
    )
    await store.save_run(failed)
    assert await store.list_runs("sched-1") == [failed, finished]


async def test_a_run_is_read_by_its_id_with_its_whole_output(store: ScheduleStore) -> None:
    await store.save_schedule(_schedule())
    long = "line of the report\n" * 2000  # 38,000 characters: kept and read whole
    finished = _run("run-1").model_copy(update={"status": "succeeded", "output": long})
    await store.save_run(finished)
    await store.save_run(_run("run-2", started_at=START + HOUR))

    assert await store.get_run("run-1") == finished
    assert (await store.get_run("run-2") or finished).id == "run-2"
    assert await store.get_run("nosuchrun") is None
    await store.delete_schedule("sched-1")
    assert await store.get_run("run-1") is None


async def test_saving_a_schedule_again_keeps_its_runs(store: ScheduleStore) -> None:
    schedule = _schedule()
    await store.save_schedule(schedule)
    await store.save_run(_run("run-1"))

    await store.save_schedule(schedule.model_copy(update={"consecutive_failures": 1}))

    assert [r.id for r in await store.list_runs(schedule.id)] == ["run-1"]


async def test_runs_list_newest_first_per_schedule_up_to_limit(store: ScheduleStore) -> None:
    await store.save_schedule(_schedule("a"))
    await store.save_schedule(_schedule("b"))
    # Saved out of order: runs list by `started_at`.
    for minutes in (3, 0, 4, 1, 2):
        await store.save_run(
            _run(f"a-{minutes}", schedule_id="a", started_at=START + timedelta(minutes=minutes))
        )
    await store.save_run(_run("b-0", schedule_id="b", started_at=START + HOUR))

    assert [r.id for r in await store.list_runs("a")] == ["a-4", "a-3", "a-2", "a-1", "a-0"]
    assert [r.id for r in await store.list_runs("a", limit=2)] == ["a-4", "a-3"]
    assert await store.list_runs("a", limit=0) == []
    assert [r.id for r in await store.list_runs("b")] == ["b-0"]
    assert await store.list_runs("nosuchsched") == []


async def test_prune_runs_keeps_the_newest(store: ScheduleStore) -> None:
    await store.save_schedule(_schedule("a"))
    await store.save_schedule(_schedule("b"))
    for minutes in (3, 0, 4, 1, 2):
        await store.save_run(
            _run(f"a-{minutes}", schedule_id="a", started_at=START + timedelta(minutes=minutes))
        )
    await store.save_run(_run("b-0", schedule_id="b"))

    assert await store.prune_runs("a", keep=2) == 3

    assert [r.id for r in await store.list_runs("a")] == ["a-4", "a-3"]
    assert await store.prune_runs("a", keep=2) == 0
    assert await store.prune_runs("a", keep=5) == 0
    assert [r.id for r in await store.list_runs("b")] == ["b-0"]
    assert await store.prune_runs("a", keep=0) == 2
    assert await store.list_runs("a") == []
    assert await store.prune_runs("nosuchsched", keep=0) == 0
    # A pruned run id can be saved again.
    await store.save_run(_run("a-0", schedule_id="a"))
    assert [r.id for r in await store.list_runs("a")] == ["a-0"]


async def test_a_run_of_an_unknown_schedule_is_refused(store: ScheduleStore) -> None:
    with pytest.raises(StoreError, match="nosuchsched"):
        await store.save_run(_run("run-1", schedule_id="nosuchsched"))

    assert await store.list_runs("nosuchsched") == []


async def test_naive_schedule_times_are_refused(store: ScheduleStore) -> None:
    naive = datetime(2025, 3, 1, 12, 0)  # noqa: DTZ001
    refused = [
        _schedule("naive-next", next_run_at=naive),
        _schedule("naive-created", created_at=naive),
        _schedule("naive-once", cadence=OnceCadence(at=naive)),
        _schedule("naive-start", cadence=IntervalCadence(seconds=60, start=naive)),
    ]
    for schedule in refused:
        with pytest.raises(StoreError, match="naive"):
            await store.save_schedule(schedule)
    assert await store.list_schedules() == []

    await store.save_schedule(_schedule())
    with pytest.raises(StoreError, match="naive"):
        await store.save_run(_run("run-1", started_at=naive))
    with pytest.raises(StoreError, match="naive"):
        await store.save_run(_run("run-2").model_copy(update={"finished_at": naive}))
    with pytest.raises(StoreError, match="naive"):
        await store.due_schedules(naive)
    assert await store.list_runs("sched-1") == []


async def test_negative_limits_are_refused(store: ScheduleStore) -> None:
    await store.save_schedule(_schedule())

    with pytest.raises(ValueError, match="limit"):
        await store.list_runs("sched-1", limit=-1)
    with pytest.raises(ValueError, match="limit"):
        await store.due_schedules(START, limit=-1)
    with pytest.raises(ValueError, match="keep"):
        await store.prune_runs("sched-1", keep=-1)
