"""The `ScheduleStore` of `SqliteStore`: schedules and runs (tables of schema version 3).

Each method checks its arguments and runs its SQL under the connection's lock and, for writes,
in one transaction (`_sqlite_base.py`). The `body` column (the model's JSON) is the record;
the other columns repeat parts of it so that queries can filter and sort.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import DeliveryState, Schedule, ScheduleRun
from core.store._shared import check_aware, check_limit, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.schedules import with_delivery

__all__ = ["SqliteSchedules"]

# `id` breaks ties of time, so both stores list equal times in the same order.
_OLDEST_FIRST: Final = "ORDER BY created_at, id"
_NEWEST_RUN_FIRST: Final = "ORDER BY started_at DESC, id DESC"


class SqliteSchedules(SqliteBase):
    """The `ScheduleStore` of `SqliteStore`."""

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id (its runs stay).

        Raises `StoreError` when any of its times is naive.
        """
        check_aware(schedule, f"schedule {schedule.id!r}")
        async with self._write(f"save schedule {schedule.id!r}"):
            target = schedule.deliver_to
            # An upsert, not INSERT OR REPLACE: replacing deletes the row, and with it (by the
            # cascade) every run of the schedule.
            await self._db.execute(
                "INSERT INTO schedules"
                " (id, owner, platform, chat, thread, status, next_run_at, created_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET owner = excluded.owner,"
                " platform = excluded.platform, chat = excluded.chat, thread = excluded.thread,"
                " status = excluded.status, next_run_at = excluded.next_run_at,"
                " created_at = excluded.created_at, body = excluded.body",
                (
                    schedule.id,
                    schedule.owner,
                    target.platform,
                    target.chat,
                    target.thread,
                    schedule.status,
                    None if schedule.next_run_at is None else utc_text(schedule.next_run_at),
                    utc_text(schedule.created_at),
                    schedule.model_dump_json(),
                ),
            )

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        async with self._read(f"read schedule {schedule_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM schedules WHERE id = ?", (schedule_id,)
            )
            for (body,) in rows:
                return Schedule.model_validate_json(body)
            return None

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first; `deliver_to.bot` is ignored."""
        async with self._read("list schedules"):
            conditions: list[str] = []
            params: list[Any] = []
            if owner is not None:
                conditions.append("owner = ?")
                params.append(owner)
            if deliver_to is not None:
                # IS, not =: a schedule without a thread matches only an address without one.
                conditions.append("platform = ? AND chat = ? AND thread IS ?")
                params.extend((deliver_to.platform, deliver_to.chat, deliver_to.thread))
            where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
            rows = await self._db.execute_fetchall(
                f"SELECT body FROM schedules{where} {_OLDEST_FIRST}", params
            )
            return [Schedule.model_validate_json(body) for (body,) in rows]

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        async with self._write(f"delete schedule {schedule_id!r}"):
            cursor = await self._db.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))
            return cursor.rowcount == 1

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first.

        Equal due times go oldest schedule first. Raises `StoreError` for a naive `now`.
        """
        check_limit(limit)
        if now.utcoffset() is None:
            raise StoreError("`now` is a naive datetime; it must be aware")
        async with self._read("find due schedules"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM schedules WHERE status = 'active' AND next_run_at <= ?"
                " ORDER BY next_run_at, created_at, id LIMIT ?",
                (utc_text(now), limit),
            )
            return [Schedule.model_validate_json(body) for (body,) in rows]

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id.

        Raises `StoreError` for an unknown schedule or a naive time.
        """
        check_aware(run, f"run {run.id!r}")
        async with self._write(f"save run {run.id!r} of schedule {run.schedule_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT 1 FROM schedules WHERE id = ?", (run.schedule_id,)
            )
            if next(iter(rows), None) is None:
                raise StoreError(f"cannot save a run: no schedule has id {run.schedule_id!r}")
            await self._db.execute(
                "INSERT INTO schedule_runs (id, schedule_id, started_at, body) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET schedule_id = excluded.schedule_id,"
                " started_at = excluded.started_at, body = excluded.body",
                (run.id, run.schedule_id, utc_text(run.started_at), run.model_dump_json()),
            )

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        check_limit(limit)
        async with self._read(f"list the runs of schedule {schedule_id!r}"):
            rows = await self._db.execute_fetchall(
                f"SELECT body FROM schedule_runs WHERE schedule_id = ? {_NEWEST_RUN_FIRST} LIMIT ?",
                (schedule_id, limit),
            )
            return [ScheduleRun.model_validate_json(body) for (body,) in rows]

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        async with self._write(f"prune the runs of schedule {schedule_id!r}"):
            cursor = await self._db.execute(
                "DELETE FROM schedule_runs WHERE schedule_id = ? AND id NOT IN"
                " (SELECT id FROM schedule_runs WHERE schedule_id = ?"
                f" {_NEWEST_RUN_FIRST} LIMIT ?)",
                (schedule_id, schedule_id, keep),
            )
            return cursor.rowcount

    async def record_delivery(
        self, schedule_id: str, run_id: str, *, state: DeliveryState, detail: str, at: datetime
    ) -> ScheduleRun | None:
        """Set a run's delivery from a receipt (one transaction); the run as stored, or None."""
        if at.utcoffset() is None:
            raise StoreError("`at` is a naive datetime; it must be aware")
        async with self._write(f"record the delivery of run {run_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM schedule_runs WHERE id = ? AND schedule_id = ?",
                (run_id, schedule_id),
            )
            found = next(iter(rows), None)
            if found is None:
                return None
            run = ScheduleRun.model_validate_json(found[0])
            changed = with_delivery(run, state=state, detail=detail, at=at)
            if changed is None:
                return run
            await self._db.execute(
                "UPDATE schedule_runs SET body = ? WHERE id = ?",
                (changed.model_dump_json(), run_id),
            )
            return changed
