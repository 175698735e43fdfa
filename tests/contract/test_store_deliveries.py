"""The delivery receipts of schedule runs (`ScheduleStore.record_delivery`).

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store import ScheduleStore
from tests.contract.store_support import START

SECOND = timedelta(seconds=1)


async def _one_run(store: ScheduleStore, run_id: str = "run-1") -> ScheduleRun:
    await store.save_schedule(
        Schedule(
            id="sched-1",
            cadence=IntervalCadence(seconds=3600, start=START),
            prompt="Anything new?",
            deliver_to=Address(platform="telegram", chat="42"),
            owner="cli",
            next_run_at=START,
            created_at=START,
            updated_at=START,
        )
    )
    run = ScheduleRun(
        id=run_id,
        schedule_id="sched-1",
        due_at=START,
        started_at=START,
        status="succeeded",
        output="Three new issues.",
        delivery="pending",
    )
    await store.save_run(run)
    return run


async def test_a_receipt_sets_the_delivery_of_the_run(store: ScheduleStore) -> None:
    await _one_run(store)

    stored = await store.record_delivery(
        "sched-1", "run-1", state="delivered", detail="501", at=START + SECOND
    )

    assert stored is not None
    assert (stored.delivery, stored.delivered, stored.delivery_detail) == ("delivered", True, "501")
    [listed] = await store.list_runs("sched-1")
    assert listed == stored
    assert listed.output == "Three new issues."


async def test_an_older_receipt_does_not_undo_a_newer_one(store: ScheduleStore) -> None:
    await _one_run(store)
    await store.record_delivery(
        "sched-1", "run-1", state="dead_lettered", detail="timed out", at=START + SECOND
    )
    # The replayed dead letter is delivered later...
    await store.record_delivery(
        "sched-1", "run-1", state="delivered", detail="777", at=START + 3 * SECOND
    )
    # ...and a late copy of the first failure changes nothing.
    kept = await store.record_delivery(
        "sched-1", "run-1", state="failed", detail="late", at=START + 2 * SECOND
    )

    assert kept is not None
    assert (kept.delivery, kept.delivery_detail) == ("delivered", "777")
    [listed] = await store.list_runs("sched-1")
    assert listed.delivered


async def test_receipts_applied_at_once_all_land(store: ScheduleStore) -> None:
    await _one_run(store)
    times = [START + n * SECOND for n in range(1, 6)]

    await asyncio.gather(
        *(
            store.record_delivery("sched-1", "run-1", state="failed", detail=str(n), at=at)
            for n, at in enumerate(times, start=1)
        )
    )

    [listed] = await store.list_runs("sched-1")
    assert (listed.delivery_detail, listed.delivery_at) == ("5", times[-1])


async def test_a_receipt_for_an_unknown_run_changes_nothing(store: ScheduleStore) -> None:
    await _one_run(store)

    assert (
        await store.record_delivery("sched-1", "nope", state="delivered", detail="", at=START)
        is None
    )
    assert (
        await store.record_delivery("nosuch", "run-1", state="delivered", detail="", at=START)
        is None
    )
    [listed] = await store.list_runs("sched-1")
    assert listed.delivery == "pending"
    with pytest.raises(StoreError, match="naive"):
        await store.record_delivery(
            "sched-1", "run-1", state="delivered", detail="", at=START.replace(tzinfo=None)
        )
