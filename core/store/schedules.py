"""Schedules and the history of their runs."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from core.envelopes import Address
from core.scheduling.models import DeliveryState, Schedule, ScheduleRun

__all__ = ["ScheduleStore", "with_delivery"]


class ScheduleStore(Protocol):
    """Schedules, which of them are due, and their runs."""

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id."""
        ...

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        ...

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first."""
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        ...

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first."""
        ...

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id."""
        ...

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        ...

    async def get_run(self, run_id: str) -> ScheduleRun | None:
        """The run with this id, whole (its output uncut), or None."""
        ...

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        ...

    async def record_delivery(
        self, schedule_id: str, run_id: str, *, state: DeliveryState, detail: str, at: datetime
    ) -> ScheduleRun | None:
        """Set a run's delivery from a gateway's receipt made at `at`, atomically.

        A receipt older than the one that set the stored state changes nothing (a replayed
        dead letter's `delivered` wins over the `dead_lettered` before it, not the reverse).
        Returns the run as stored afterwards, or None when there is no such run.
        """
        ...


def with_delivery(
    run: ScheduleRun, *, state: DeliveryState, detail: str, at: datetime
) -> ScheduleRun | None:
    """`run` with the receipt applied, or None when a later receipt set it already."""
    if run.delivery_at is not None and at < run.delivery_at:
        return None
    return run.model_copy(
        update={
            "delivery": state,
            "delivered": state == "delivered",
            "delivery_detail": detail,
            "delivery_at": at,
        }
    )
