"""The `ScheduleStore` of `SqlStore`: schedules and their runs.

The `body` column (the model's JSON) is the record; the other columns repeat parts of it so
that queries can filter and sort.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import upsert
from core.backends.sql.store._tables import schedule_runs, schedules
from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import DeliveryState, Schedule, ScheduleRun
from core.store._shared import check_aware, check_limit, utc_text
from core.store.schedules import with_delivery

__all__ = ["SqlSchedules"]

s = schedules.c
r = schedule_runs.c
# `id` breaks ties of time, so every store lists equal times in the same order.
_NEWEST_RUN_FIRST = (r.started_at.desc(), r.id.desc())


class SqlSchedules(SqlBase):
    """The `ScheduleStore` of `SqlStore`."""

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id (its runs stay).

        Raises `StoreError` when any of its times is naive.
        """
        check_aware(schedule, f"schedule {schedule.id!r}")
        target = schedule.deliver_to
        values = {
            "id": schedule.id,
            "owner": schedule.owner,
            "platform": target.platform,
            "chat": target.chat,
            "thread": target.thread,
            "status": schedule.status,
            "next_run_at": None if schedule.next_run_at is None else utc_text(schedule.next_run_at),
            "created_at": utc_text(schedule.created_at),
            "body": schedule.model_dump_json(),
        }
        async with self._begin(f"save schedule {schedule.id!r}") as db:
            await db.execute(upsert(self._dialect, schedules, tuple(values), keys=("id",)), values)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        async with self._read(f"read schedule {schedule_id!r}") as db:
            body = (await db.execute(select(s.body).where(s.id == schedule_id))).scalar()
            return None if body is None else Schedule.model_validate_json(body)

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first; `deliver_to.bot` is ignored."""
        query = select(s.body).order_by(s.created_at, s.id)
        if owner is not None:
            query = query.where(s.owner == owner)
        if deliver_to is not None:
            # IS NOT DISTINCT FROM: a schedule without a thread matches only an address
            # without one.
            query = query.where(
                s.platform == deliver_to.platform,
                s.chat == deliver_to.chat,
                s.thread.is_not_distinct_from(deliver_to.thread),
            )
        async with self._read("list schedules") as db:
            return [Schedule.model_validate_json(body) for body in await db.scalars(query)]

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        async with self._begin(f"delete schedule {schedule_id!r}") as db:
            await db.execute(delete(schedule_runs).where(r.schedule_id == schedule_id))
            deleted = await db.execute(delete(schedules).where(s.id == schedule_id))
            return deleted.rowcount == 1

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first
        (equal due times: oldest schedule first). `StoreError` for a naive `now`."""
        check_limit(limit)
        if now.utcoffset() is None:
            raise StoreError("`now` is a naive datetime; it must be aware")
        query = (
            select(s.body)
            .where(s.status == "active", s.next_run_at <= utc_text(now))
            .order_by(s.next_run_at, s.created_at, s.id)
            .limit(limit)
        )
        async with self._read("find due schedules") as db:
            return [Schedule.model_validate_json(body) for body in await db.scalars(query)]

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id.

        Raises `StoreError` for an unknown schedule or a naive time.
        """
        check_aware(run, f"run {run.id!r}")
        values = {
            "id": run.id,
            "schedule_id": run.schedule_id,
            "started_at": utc_text(run.started_at),
            "body": run.model_dump_json(),
        }
        async with self._begin(f"save run {run.id!r} of schedule {run.schedule_id!r}") as db:
            known = await db.execute(select(s.id).where(s.id == run.schedule_id))
            if known.first() is None:
                raise StoreError(f"cannot save a run: no schedule has id {run.schedule_id!r}")
            await db.execute(
                upsert(self._dialect, schedule_runs, tuple(values), keys=("id",)), values
            )

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        check_limit(limit)
        query = (
            select(r.body)
            .where(r.schedule_id == schedule_id)
            .order_by(*_NEWEST_RUN_FIRST)
            .limit(limit)
        )
        async with self._read(f"list the runs of schedule {schedule_id!r}") as db:
            return [ScheduleRun.model_validate_json(body) for body in await db.scalars(query)]

    async def get_run(self, run_id: str) -> ScheduleRun | None:
        """The run with this id, whole (its output uncut), or None."""
        async with self._read(f"read run {run_id!r}") as db:
            body = await db.scalar(select(r.body).where(r.id == run_id))
        return None if body is None else ScheduleRun.model_validate_json(body)

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        kept = (
            select(r.id)
            .where(r.schedule_id == schedule_id)
            .order_by(*_NEWEST_RUN_FIRST)
            .limit(keep)
        )
        async with self._begin(f"prune the runs of schedule {schedule_id!r}") as db:
            deleted = await db.execute(
                delete(schedule_runs).where(
                    r.schedule_id == schedule_id, r.id.not_in(kept.scalar_subquery())
                )
            )
            return int(deleted.rowcount)

    async def record_delivery(
        self, schedule_id: str, run_id: str, *, state: DeliveryState, detail: str, at: datetime
    ) -> ScheduleRun | None:
        """Set a run's delivery from a receipt (one transaction); the run as stored, or None."""
        if at.utcoffset() is None:
            raise StoreError("`at` is a naive datetime; it must be aware")
        async with self._begin(f"record the delivery of run {run_id!r}") as db:
            body = (
                await db.execute(
                    select(r.body)
                    .where(r.id == run_id, r.schedule_id == schedule_id)
                    .with_for_update()
                )
            ).scalar()
            if body is None:
                return None
            run = ScheduleRun.model_validate_json(body)
            changed = with_delivery(run, state=state, detail=detail, at=at)
            if changed is None:
                return run
            await db.execute(
                update(schedule_runs).where(r.id == run_id).values(body=changed.model_dump_json())
            )
            return changed
