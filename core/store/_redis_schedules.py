"""The `ScheduleStore` of `RedisStore`: schedules and their runs.

Layout (keys in `core/redis_keys.py`): a hash per schedule holding its JSON; a set of every
schedule id and one per owner, for listing; `due_schedules`, the active schedules that have a
next run, scored by `next_run_at`; per schedule, a hash of its runs and a sorted set ordering
them by `started_at`.

Every write is one script, atomic on the server, and safe to replay (`core/store/redis.py`
says why that matters): saves leave the same state however often they run, while delete and
prune keep a receipt so that a replay answers what the first run did. A script touches only
keys in its KEYS, so one that must take a schedule out of its stored owner's set is told that
owner, and refuses when the schedule's owner changed since; the caller reads and tries again.

Each method checks its arguments and turns client errors into `StoreError`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final, cast
from uuid import uuid4

from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import DeliveryState, Schedule, ScheduleRun
from core.store._redis_base import RECEIPT_SECONDS, RedisBase
from core.store._shared import check_aware, check_limit, delivers_to, epoch_micros
from core.store.schedules import with_delivery

__all__ = ["RedisSchedules"]

# How often a write reads the stored owner again when another write moved it in between.
_ATTEMPTS: Final = 5
# Runs removed per command by a prune: Lua's `unpack` has a bounded stack.
_PRUNE_BATCH: Final = 1000

# KEYS: schedule, schedules, due_schedules, owner's set, stored owner's set
# ARGV: id, body (JSON), owner, stored owner ('=' .. owner; '' when there is no schedule),
#       due member ('' when not due), due score (epoch microseconds)
# Returns 1, or 0 (nothing written) when the stored owner is not the one expected.
_SAVE_SCHEDULE: Final = """
local stored = redis.call('HGET', KEYS[1], 'owner')
if (stored and ('=' .. stored) or '') ~= ARGV[4] then return 0 end
local member = redis.call('HGET', KEYS[1], 'due')
if member then redis.call('ZREM', KEYS[3], member) end
if stored and stored ~= ARGV[3] then redis.call('SREM', KEYS[5], ARGV[1]) end
redis.call('HSET', KEYS[1], 'body', ARGV[2], 'owner', ARGV[3])
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[1], 'due')
else
  redis.call('HSET', KEYS[1], 'due', ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[5])
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
return 1
"""

# KEYS: schedule, schedules, due_schedules, stored owner's set, runs, run order, receipt
# ARGV: id, stored owner ('=' .. owner), receipt lifetime (s)
# Returns 1 when it deleted the schedule, 0 when there was none, -1 (nothing deleted) when the
# stored owner is not the one expected. A replay returns the first run's reply.
_DELETE_SCHEDULE: Final = """
local done = redis.call('GET', KEYS[7])
if done then return tonumber(done) end
local stored = redis.call('HGET', KEYS[1], 'owner')
if not stored then return 0 end
if ('=' .. stored) ~= ARGV[2] then return -1 end
local member = redis.call('HGET', KEYS[1], 'due')
if member then redis.call('ZREM', KEYS[3], member) end
redis.call('DEL', KEYS[1], KEYS[5], KEYS[6])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('SET', KEYS[7], 1, 'EX', ARGV[3])
return 1
"""

# KEYS: schedule, runs, run order
# ARGV: run id, run (JSON), started_at (epoch microseconds)
# Returns 1, or 0 (nothing written) for an unknown schedule.
_SAVE_RUN: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return 1
"""

# KEYS: runs, run order, receipt
# ARGV: how many to keep, receipt lifetime (s)
# Returns how many runs it deleted (a replay: the first run's count). The oldest go first;
# equal start times go by run id, like SQLite's `ORDER BY started_at, id`.
_PRUNE_RUNS: Final = f"""
local done = redis.call('GET', KEYS[3])
if done then return tonumber(done) end
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
local gone = 0
while gone < extra do
  local ids = redis.call('ZRANGE', KEYS[2], 0, math.min(extra - gone, {_PRUNE_BATCH}) - 1)
  if #ids == 0 then break end
  redis.call('ZREM', KEYS[2], unpack(ids))
  redis.call('HDEL', KEYS[1], unpack(ids))
  gone = gone + #ids
end
redis.call('SET', KEYS[3], gone, 'EX', ARGV[2])
return gone
"""


# KEYS: runs. ARGV: run id, the run's JSON as read, the new JSON.
# Returns 1, or 0 (nothing written) when the stored run is not the one read: a compare-and-set,
# so two receipts of one run applied at once cannot lose either; the caller reads again.
_SET_RUN_IF: Final = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


class RedisSchedules(RedisBase):
    """The `ScheduleStore` of `RedisStore`."""

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id (its runs stay).

        Raises `StoreError` when any of its times is naive.
        """
        check_aware(schedule, f"schedule {schedule.id!r}")
        with self._translated(f"save schedule {schedule.id!r}"):
            key = self._keys.schedule(schedule.id)
            due_at = schedule.next_run_at if schedule.status == "active" else None
            member = "" if due_at is None else _due_member(schedule)
            score = 0 if due_at is None else epoch_micros(due_at)
            body = schedule.model_dump_json()
            for _ in range(_ATTEMPTS):
                stored = await self._stored_owner(key)
                saved = await self._script(_SAVE_SCHEDULE)(
                    keys=[
                        key,
                        self._keys.schedules(),
                        self._keys.due_schedules(),
                        self._keys.schedules_by_owner(schedule.owner),
                        self._keys.schedules_by_owner(schedule.owner if stored is None else stored),
                    ],
                    args=[schedule.id, body, schedule.owner, _expected(stored), member, score],
                )
                if int(saved) == 1:
                    return
            raise StoreError(f"schedule {schedule.id!r} kept changing owner while being saved")

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        with self._translated(f"read schedule {schedule_id!r}"):
            body = await self._client.hget(self._keys.schedule(schedule_id), "body")
            return None if body is None else Schedule.model_validate_json(body)

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first; `deliver_to.bot` is ignored."""
        with self._translated("list schedules"):
            index = (
                self._keys.schedules() if owner is None else self._keys.schedules_by_owner(owner)
            )
            ids = [_text(i) for i in cast(set[bytes], await self._client.smembers(index))]
            found = await self._read_schedules(ids)
            if deliver_to is not None:
                found = [s for s in found if delivers_to(s, deliver_to)]
            # The id breaks ties of time, as in the SQLite store.
            return sorted(found, key=lambda s: (s.created_at, s.id))

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        with self._translated(f"delete schedule {schedule_id!r}"):
            key = self._keys.schedule(schedule_id)
            for _ in range(_ATTEMPTS):
                stored = await self._stored_owner(key)
                if stored is None:
                    return False
                deleted = int(
                    await self._script(_DELETE_SCHEDULE)(
                        keys=[
                            key,
                            self._keys.schedules(),
                            self._keys.due_schedules(),
                            self._keys.schedules_by_owner(stored),
                            self._keys.schedule_runs(schedule_id),
                            self._keys.schedule_run_order(schedule_id),
                            self._keys.write_receipt(uuid4().hex),
                        ],
                        args=[schedule_id, _expected(stored), RECEIPT_SECONDS],
                    )
                )
                if deleted >= 0:
                    return deleted == 1
            raise StoreError(f"schedule {schedule_id!r} kept changing owner while being deleted")

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first.

        Equal due times go oldest schedule first. Raises `StoreError` for a naive `now`.
        """
        check_limit(limit)
        if now.utcoffset() is None:
            raise StoreError("`now` is a naive datetime; it must be aware")
        with self._translated("find due schedules"):
            now_micros = epoch_micros(now)
            if limit == 0:
                return []
            members = cast(
                list[bytes],
                await self._client.zrangebyscore(
                    self._keys.due_schedules(), "-inf", now_micros, start=0, num=limit
                ),
            )
            return await self._read_schedules([_text(m).split(":", 1)[1] for m in members])

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id.

        Raises `StoreError` for an unknown schedule or a naive time.
        """
        check_aware(run, f"run {run.id!r}")
        with self._translated(f"save run {run.id!r} of schedule {run.schedule_id!r}"):
            saved = await self._script(_SAVE_RUN)(
                keys=[
                    self._keys.schedule(run.schedule_id),
                    self._keys.schedule_runs(run.schedule_id),
                    self._keys.schedule_run_order(run.schedule_id),
                ],
                args=[run.id, run.model_dump_json(), epoch_micros(run.started_at)],
            )
            if int(saved) == 0:
                raise StoreError(f"cannot save a run: no schedule has id {run.schedule_id!r}")

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        check_limit(limit)
        with self._translated(f"list the runs of schedule {schedule_id!r}"):
            if limit == 0:
                return []
            ids = cast(
                list[bytes],
                await self._client.zrevrange(
                    self._keys.schedule_run_order(schedule_id), 0, limit - 1
                ),
            )
            if not ids:
                return []
            bodies = cast(
                list[bytes | None],
                await self._client.hmget(self._keys.schedule_runs(schedule_id), ids),
            )
            # A run pruned between the two reads is simply left out.
            return [ScheduleRun.model_validate_json(b) for b in bodies if b is not None]

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        with self._translated(f"prune the runs of schedule {schedule_id!r}"):
            gone = await self._script(_PRUNE_RUNS)(
                keys=[
                    self._keys.schedule_runs(schedule_id),
                    self._keys.schedule_run_order(schedule_id),
                    self._keys.write_receipt(uuid4().hex),
                ],
                args=[keep, RECEIPT_SECONDS],
            )
            return int(gone)

    async def record_delivery(
        self, schedule_id: str, run_id: str, *, state: DeliveryState, detail: str, at: datetime
    ) -> ScheduleRun | None:
        """Set a run's delivery from a receipt (compare-and-set); the run as stored, or None."""
        if at.utcoffset() is None:
            raise StoreError("`at` is a naive datetime; it must be aware")
        runs = self._keys.schedule_runs(schedule_id)
        with self._translated(f"record the delivery of run {run_id!r}"):
            for _ in range(_ATTEMPTS):
                body = cast(bytes | None, await self._client.hget(runs, run_id))
                if body is None:
                    return None
                run = ScheduleRun.model_validate_json(body)
                changed = with_delivery(run, state=state, detail=detail, at=at)
                if changed is None:
                    return run
                stored = await self._script(_SET_RUN_IF)(
                    keys=[runs], args=[run_id, body, changed.model_dump_json()]
                )
                if int(stored) == 1:
                    return changed
            raise StoreError(f"run {run_id!r} kept changing while its delivery was recorded")

    async def _stored_owner(self, key: str) -> str | None:
        owner = await self._client.hget(key, "owner")
        return None if owner is None else _text(owner)

    async def _read_schedules(self, schedule_ids: Sequence[str]) -> list[Schedule]:
        """These schedules in order, leaving out ids deleted meanwhile."""
        if not schedule_ids:
            return []
        async with self._client.pipeline(transaction=True) as pipe:
            for schedule_id in schedule_ids:
                pipe.hget(self._keys.schedule(schedule_id), "body")
            bodies = cast(list[bytes | None], await pipe.execute())
        return [Schedule.model_validate_json(b) for b in bodies if b is not None]


def _due_member(schedule: Schedule) -> str:
    """`<created_at, 20 digits>:<id>`: equal due times then sort oldest schedule first."""
    return f"{epoch_micros(schedule.created_at):020d}:{schedule.id}"


def _expected(stored_owner: str | None) -> str:
    """How a script is told the stored owner: `=` and the owner, or empty when none."""
    return "" if stored_owner is None else f"={stored_owner}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
