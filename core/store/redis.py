"""`RedisStore`: the `Store` on Redis, shared by every process of a distributed deployment.

Each write is one Lua script (or one command), so it is atomic on the server: a session's `seq`
counter and its message list move together, `current_session` cannot create two sessions for
one key, and the ledger's running totals never disagree with its entries. Values are JSON of
pydantic models.

Every write is also safe to send twice with the same arguments, which is what the client does
when a connection drops (a stale pooled connection after a Redis restart, a lost reply): a
replayed script finds the receipt of its first run and returns that run's reply instead of
storing a message or a charge twice. `mark_processed` needs Redis 7 (`SET NX GET`).

Schedules and their runs are kept by `core/store/_redis_schedules.py`, remembered facts by
`core/store/_redis_facts.py`, compaction summaries by `core/store/_redis_summaries.py`, turn
checkpoints by `core/store/_redis_checkpoints.py`, on the same terms.

Durability: a write is done when the server has run it. Whether it survives a crash of the
server is a deployment setting: run Redis with `appendonly yes` (`appendfsync always` to lose
nothing, `everysec` to risk up to a second). Every key a script touches is passed in `KEYS`,
but the keys of one operation do not share a hash slot: this store wants one Redis server (or
a replicated primary), not a Redis Cluster.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, cast
from urllib.parse import urlsplit
from uuid import uuid4

import redis.asyncio as aioredis
from pydantic import BaseModel, ValidationError
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from core import redis_keys
from core.checkpoints import Checkpoint, CheckpointStatus
from core.clock import utc_now
from core.envelopes import Address
from core.errors import StoreError
from core.facts import MemoryFact, MemoryQuery
from core.messages import Message, Usage
from core.scheduling.models import Schedule, ScheduleRun
from core.store._redis_checkpoints import RedisCheckpoints
from core.store._redis_facts import RedisMemory
from core.store._redis_schedules import RedisSchedules
from core.store._redis_summaries import RedisSummaries
from core.store._shared import check_aware, check_limit, epoch_micros, from_utc_text, utc_text
from core.store.base import CompactionSummary, CostEntry, CostSummary, Fence, SessionRecord

__all__ = ["DEFAULT_PROCESSED_TTL", "RedisStore"]

# How long "this inbound message was answered" is remembered: far longer than any platform
# redelivers an update, short enough that the markers do not pile up forever.
DEFAULT_PROCESSED_TTL: Final = timedelta(days=30)

# How long a write's receipt outlives it: far longer than the client keeps retrying.
_RECEIPT_SECONDS: Final = 600

# A fresh session id colliding with a stored one is all but impossible; retry a few times.
_ID_ATTEMPTS: Final = 3

# Shared by the scripts: a zset member that sorts by an order number among equal scores.
_RANKED_MEMBER: Final = "string.format('%020d', {order}) .. ':' .. {session_id}"

# KEYS: sessions_by_key, sessions_by_update, session_order, session(new id)
# ARGV: new id, key, now (text), now (epoch microseconds), "current" | "create"
# Returns {0, id} for the key's newest session, {1, id} when it made one, {2} on an id clash.
# A replay (same new id, key and time) finds the session it made and returns {1, id} again.
_OPEN_SESSION: Final = f"""
if ARGV[5] == 'current' then
  local newest = redis.call('ZREVRANGE', KEYS[1], 0, 0)
  if newest[1] then return {{0, newest[1]}} end
end
local made = redis.call('HMGET', KEYS[4], 'key', 'created_at')
if made[1] then
  if made[1] == ARGV[2] and made[2] == ARGV[3] then return {{1, ARGV[1]}} end
  return {{2}}
end
local order = redis.call('INCR', KEYS[3])
local member = {_RANKED_MEMBER.format(order="order", session_id="ARGV[1]")}
redis.call('HSET', KEYS[4], 'id', ARGV[1], 'key', ARGV[2], 'created_at', ARGV[3],
  'updated_at', ARGV[3], 'member', member)
redis.call('ZADD', KEYS[1], order, ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], member)
return {{1, ARGV[1]}}
"""

# KEYS: session, messages, message_seq, sessions_by_update, write_receipt, fence lease
# ARGV: now (text), now (epoch microseconds), message body (JSON), receipt lifetime (s),
#       fence token ("" without a fence)
# Returns the new seq (a replay: the first run's), nil for an unknown session, -1 when the
# fence's lease is held by someone else (the writer lost it).
_APPEND_MESSAGE: Final = """
local done = redis.call('GET', KEYS[5])
if done then return tonumber(done) end
if ARGV[5] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[5] then return -1 end
local member = redis.call('HGET', KEYS[1], 'member')
if not member then return false end
local seq = redis.call('INCR', KEYS[3])
redis.call('RPUSH', KEYS[2], string.format('{"seq":%d,"created_at":"%s","body":%s}',
  seq, ARGV[1], ARGV[3]))
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], member)
redis.call('SET', KEYS[5], seq, 'EX', ARGV[4])
return seq
"""

# KEYS: session, costs, cost_totals, all_cost_totals, sessions_with_costs, cost_order,
#       write_receipt
# ARGV: session id, entry (JSON), input, output, cache read, cache write tokens,
#       cost in USD ("" when unpriced), at (epoch microseconds), receipt lifetime (s)
# Returns 1 (also on a replay), or nil for an unknown session.
_RECORD_COST: Final = f"""
if redis.call('EXISTS', KEYS[7]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('RPUSH', KEYS[2], ARGV[2])
local order = redis.call('INCR', KEYS[6])
for _, totals in ipairs({{KEYS[3], KEYS[4]}}) do
  redis.call('HINCRBY', totals, 'calls', 1)
  redis.call('HINCRBY', totals, 'input_tokens', ARGV[3])
  redis.call('HINCRBY', totals, 'output_tokens', ARGV[4])
  redis.call('HINCRBY', totals, 'cache_read_tokens', ARGV[5])
  redis.call('HINCRBY', totals, 'cache_write_tokens', ARGV[6])
  if ARGV[7] == '' then
    redis.call('HINCRBY', totals, 'unpriced_calls', 1)
  else
    redis.call('HINCRBYFLOAT', totals, 'cost_usd', ARGV[7])
  end
end
-- The session ranks by its latest `at`; its member carries the order of its last entry.
-- Scores stay the strings they came as: no digit is lost to a number-to-text conversion.
local latest = redis.call('HGET', KEYS[3], 'latest_at')
local score = ARGV[8]
if latest and tonumber(latest) > tonumber(score) then score = latest end
local previous = redis.call('HGET', KEYS[3], 'member')
if previous then redis.call('ZREM', KEYS[5], previous) end
local member = {_RANKED_MEMBER.format(order="order", session_id="ARGV[1]")}
redis.call('ZADD', KEYS[5], score, member)
redis.call('HSET', KEYS[3], 'latest_at', score, 'member', member)
redis.call('SET', KEYS[7], 1, 'EX', ARGV[9])
return 1
"""

_SESSION_FIELDS: Final = ("id", "key", "created_at", "updated_at")
_TOTAL_FIELDS: Final = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "unpriced_calls",
)


class _StoredMessage(BaseModel):
    """One entry of a session's message list: the body without `seq` and `created_at`."""

    seq: int
    created_at: datetime
    body: Message


class RedisStore:
    """The `Store` on Redis, opened with `await RedisStore.open(url)`.

    Every write is a single atomic command or script, complete when the awaited call returns.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        clock: Callable[[], datetime] = utc_now,
        processed_ttl: timedelta = DEFAULT_PROCESSED_TTL,
    ) -> None:
        """Wrap a client made with `decode_responses=False`; `close()` closes it."""
        if processed_ttl <= timedelta(0):
            raise ValueError(f"processed_ttl must be positive, got {processed_ttl}")
        self._client = client
        self._clock = clock
        self._processed_ttl_ms = max(1, processed_ttl // timedelta(milliseconds=1))
        self._open_session = client.register_script(_OPEN_SESSION)
        self._append_message = client.register_script(_APPEND_MESSAGE)
        self._record_cost = client.register_script(_RECORD_COST)
        self._schedules = RedisSchedules(client, receipt_seconds=_RECEIPT_SECONDS)
        self._memory = RedisMemory(client, receipt_seconds=_RECEIPT_SECONDS)
        self._summaries = RedisSummaries(client)
        self._checkpoints = RedisCheckpoints(client)
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        processed_ttl: timedelta = DEFAULT_PROCESSED_TTL,
    ) -> RedisStore:
        """Connect to the Redis at `url` and check that it answers.

        The client retries a dropped connection briefly (every write is idempotent); a server
        that stays unreachable is a `StoreError`.
        """
        where = _describe(url)
        try:
            client = aioredis.Redis.from_url(url, decode_responses=False, retry=_retry())
        except ValueError:
            # The parser's message may quote the URL, and with it a password.
            raise StoreError(f"the Redis store URL {where} is not valid") from None
        try:
            await client.ping()
        except BaseException as exc:
            await client.aclose()
            if isinstance(exc, RedisError):
                raise StoreError(f"cannot reach the Redis store at {where}: {exc}") from exc
            raise
        return cls(client, clock=clock, processed_ttl=processed_ttl)

    async def close(self) -> None:
        """Close the client; later calls raise `StoreError`."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.aclose()
        except RedisError as exc:
            raise StoreError(f"closing the Redis store failed: {exc}") from exc

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        async with self._translated(f"create a session for {key!r}"):
            return await self._open(key, mode="create")

    async def current_session(self, key: str) -> SessionRecord:
        """The newest session for `key`, created if the key has none yet."""
        async with self._translated(f"find the current session of {key!r}"):
            return await self._open(key, mode="current")

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        async with self._translated(f"read session {session_id!r}"):
            found = await self._read_sessions([session_id])
        return found[0] if found else None

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first (on equal times, the newer session first)."""
        check_limit(limit)
        if limit == 0:
            return []
        async with self._translated("list sessions"):
            members = cast(
                list[bytes],
                await self._client.zrevrange(redis_keys.sessions_by_update(), 0, limit - 1),
            )
            # Sessions are never deleted, so every listed id still has its hash.
            return await self._read_sessions([_ranked_id(m) for m in members])

    async def append_message(
        self, session_id: str, message: Message, *, fence: Fence | None = None
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        Raises `StoreError` for an unknown session, or when `fence`'s lease is no longer held
        by its token (checked in the same script as the write).
        """
        body = message.model_dump_json(exclude={"seq", "created_at"})
        async with self._translated(f"append a message to session {session_id!r}"):
            now = self._now()
            seq = await self._append_message(
                keys=[
                    redis_keys.session(session_id),
                    redis_keys.messages(session_id),
                    redis_keys.message_seq(session_id),
                    redis_keys.sessions_by_update(),
                    redis_keys.write_receipt(uuid4().hex),
                    fence.lease_key if fence else redis_keys.lease("none"),
                ],
                args=[
                    utc_text(now),
                    epoch_micros(now),
                    body,
                    _RECEIPT_SECONDS,
                    fence.token if fence else "",
                ],
            )
        if seq is None:
            raise StoreError(f"cannot append a message: no session has id {session_id!r}")
        if int(seq) < 0:
            raise StoreError(f"cannot append to session {session_id!r}: the turn's lease was lost")
        return message.model_copy(update={"seq": int(seq), "created_at": now})

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        if limit is not None:
            check_limit(limit)
            if limit == 0:
                return []
        # `seq` is the list index plus one; a negative index would count from the end.
        start = max(after_seq, 0)
        stop = -1 if limit is None else start + limit - 1
        async with self._translated(f"list the messages of session {session_id!r}"):
            raw = cast(
                list[bytes],
                await self._client.lrange(redis_keys.messages(session_id), start, stop),
            )
            return [_decode_message(item) for item in raw]

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary; one with the same `up_to_seq` replaces the stored one.

        Raises `StoreError` for an unknown session or a naive time.
        """
        check_aware(summary, f"the summary of session {session_id!r}")
        async with self._translated(f"save a summary of session {session_id!r}"):
            await self._summaries.save_summary(session_id, summary)

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        async with self._translated(f"read the summary of session {session_id!r}"):
            return await self._summaries.latest_summary(session_id)

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was.

        The marker expires after `processed_ttl`.
        """
        # A unique marker tells a replay of our own SET (it finds the marker it wrote) from a
        # key that someone else marked first.
        marker = f"{utc_text(self._now())} {uuid4().hex}"
        async with self._translated(f"mark {key!r} processed"):
            before = await self._client.set(
                redis_keys.processed(key), marker, nx=True, px=self._processed_ttl_ms, get=True
            )
        # With GET, SET answers the value it found (it set nothing) or nil (it set ours).
        if before is None:
            return True
        return isinstance(before, bytes | str) and _text(before) == marker

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before (within `processed_ttl`)."""
        async with self._translated(f"check whether {key!r} was processed"):
            return bool(await self._client.exists(redis_keys.processed(key)))

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger.

        Raises `StoreError` for an unknown session or a naive `entry.at`, and `ValueError` for
        a cost that is not a finite number.
        """
        if entry.cost_usd is not None and not math.isfinite(entry.cost_usd):
            raise ValueError(f"cost_usd must be a finite number, got {entry.cost_usd!r}")
        if entry.at.tzinfo is None:
            raise StoreError("a cost entry's `at` is a naive datetime; it must be aware")
        usage = entry.usage
        session_id = entry.session_id
        async with self._translated(f"record a cost for session {session_id!r}"):
            recorded = await self._record_cost(
                keys=[
                    redis_keys.session(session_id),
                    redis_keys.costs(session_id),
                    redis_keys.cost_totals(session_id),
                    redis_keys.all_cost_totals(),
                    redis_keys.sessions_with_costs(),
                    redis_keys.cost_order(),
                    redis_keys.write_receipt(uuid4().hex),
                ],
                args=[
                    session_id,
                    entry.model_dump_json(),
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    "" if entry.cost_usd is None else repr(entry.cost_usd),
                    epoch_micros(entry.at),
                    _RECEIPT_SECONDS,
                ],
            )
        if recorded is None:
            raise StoreError(f"cannot record a cost: no session has id {session_id!r}")

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None.

        A session without ledger entries (or an unknown one) sums to zero.
        """
        key = (
            redis_keys.all_cost_totals()
            if session_id is None
            else redis_keys.cost_totals(session_id)
        )
        whose = "all sessions" if session_id is None else f"session {session_id!r}"
        async with self._translated(f"sum the costs of {whose}"):
            values = await self._client.hmget(key, list(_TOTAL_FIELDS))
            return _summary(session_id, values)

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first.

        Only sessions with ledger entries appear. "Most recently charged" is the latest entry
        `at`; on a tie the session whose newest entry was recorded last comes first.
        """
        check_limit(limit)
        if limit == 0:
            return []
        async with self._translated("sum costs by session"):
            members = cast(
                list[bytes],
                await self._client.zrevrange(redis_keys.sessions_with_costs(), 0, limit - 1),
            )
            ids = [_ranked_id(m) for m in members]
            async with self._client.pipeline(transaction=True) as pipe:
                for session_id in ids:
                    pipe.hmget(redis_keys.cost_totals(session_id), list(_TOTAL_FIELDS))
                rows = await pipe.execute()
            return [_summary(session_id, row) for session_id, row in zip(ids, rows, strict=True)]

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id (its runs stay).

        Raises `StoreError` when any of its times is naive.
        """
        check_aware(schedule, f"schedule {schedule.id!r}")
        async with self._translated(f"save schedule {schedule.id!r}"):
            await self._schedules.save_schedule(schedule)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        async with self._translated(f"read schedule {schedule_id!r}"):
            return await self._schedules.get_schedule(schedule_id)

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first; `deliver_to.bot` is ignored."""
        async with self._translated("list schedules"):
            return await self._schedules.list_schedules(owner=owner, deliver_to=deliver_to)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        async with self._translated(f"delete schedule {schedule_id!r}"):
            return await self._schedules.delete_schedule(schedule_id)

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first.

        Equal due times go oldest schedule first. Raises `StoreError` for a naive `now`.
        """
        check_limit(limit)
        if now.utcoffset() is None:
            raise StoreError("`now` is a naive datetime; it must be aware")
        async with self._translated("find due schedules"):
            return await self._schedules.due_schedules(epoch_micros(now), limit)

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id.

        Raises `StoreError` for an unknown schedule or a naive time.
        """
        check_aware(run, f"run {run.id!r}")
        async with self._translated(f"save run {run.id!r} of schedule {run.schedule_id!r}"):
            await self._schedules.save_run(run)

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        check_limit(limit)
        async with self._translated(f"list the runs of schedule {schedule_id!r}"):
            return await self._schedules.list_runs(schedule_id, limit)

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        async with self._translated(f"prune the runs of schedule {schedule_id!r}"):
            return await self._schedules.prune_runs(schedule_id, keep)

    async def remember_fact(self, fact: MemoryFact) -> None:
        """Store a fact in its scope; the same fact again changes nothing.

        Raises `StoreError` for another fact with an id the scope holds, or a naive time.
        """
        check_aware(fact, f"fact {fact.id!r}")
        async with self._translated(f"remember fact {fact.id!r} of {fact.scope!r}"):
            await self._memory.remember_fact(fact)

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` sharing the most terms with `query`, then the newest; without
        search terms, the newest facts."""
        check_limit(limit)
        async with self._translated(f"search the facts of {scope!r}"):
            return await self._memory.search_facts(scope, MemoryQuery.parse(query), limit)

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest first."""
        check_limit(limit)
        async with self._translated(f"list the facts of {scope!r}"):
            return await self._memory.list_facts(scope, limit)

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        async with self._translated(f"forget fact {fact_id!r} of {scope!r}"):
            return await self._memory.forget_fact(scope, fact_id)

    async def _open(self, key: str, *, mode: Literal["current", "create"]) -> SessionRecord:
        """The key's newest session (`mode="current"`) or a new one, atomically."""
        for _ in range(_ID_ATTEMPTS):
            now = self._now()
            new_id = uuid4().hex[:12]
            reply = await self._open_session(
                keys=[
                    redis_keys.sessions_by_key(key),
                    redis_keys.sessions_by_update(),
                    redis_keys.session_order(),
                    redis_keys.session(new_id),
                ],
                args=[new_id, key, utc_text(now), epoch_micros(now), mode],
            )
            outcome = int(reply[0])
            if outcome == 1:
                return SessionRecord(id=new_id, key=key, created_at=now, updated_at=now)
            if outcome == 0:
                found = await self._read_sessions([_text(reply[1])])
                if not found:
                    raise StoreError(f"session {_text(reply[1])!r} of {key!r} has no record")
                return found[0]
        raise StoreError(f"no unused session id found in {_ID_ATTEMPTS} attempts")

    async def _read_sessions(self, session_ids: Sequence[str]) -> list[SessionRecord]:
        """The records of these sessions, in order, leaving out unknown ids."""
        if not session_ids:
            return []
        async with self._client.pipeline(transaction=True) as pipe:
            for session_id in session_ids:
                pipe.hmget(redis_keys.session(session_id), list(_SESSION_FIELDS))
                pipe.llen(redis_keys.messages(session_id))
            replies = await pipe.execute()
        records = []
        for fields, count in zip(replies[::2], replies[1::2], strict=True):
            if fields[0] is not None:
                records.append(_session(fields, count))
        return records

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
        async with self._translated(f"save checkpoint {checkpoint.run_key!r}"):
            await self._checkpoints.save_checkpoint(checkpoint)

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        async with self._translated(f"read checkpoint {run_key!r}"):
            return await self._checkpoints.get_checkpoint(run_key)

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        async with self._translated("list incomplete checkpoints"):
            return await self._checkpoints.incomplete_checkpoints(older_than)

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status; False if there is none."""
        async with self._translated(f"finish checkpoint {run_key!r}"):
            return await self._checkpoints.finish_checkpoint(run_key, status, self._now())

    @asynccontextmanager
    async def _translated(self, action: str) -> AsyncIterator[None]:
        """Turn client failures into `StoreError`s that say what the store was doing."""
        self._ensure_open()
        try:
            yield
        except RedisError as exc:
            raise StoreError(f"Redis store could not {action}: {exc}") from exc
        except ValidationError as exc:
            raise StoreError(
                f"Redis store could not {action}: stored data is invalid: {exc}"
            ) from exc

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError("the Redis store is closed")

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)


def _retry() -> Retry:
    """Retry a dropped connection a few times, quickly.

    Safe because every write is idempotent (see the module docstring); a server that stays away
    surfaces as a `StoreError` within a second instead of holding up a turn.
    """
    return Retry(ExponentialWithJitterBackoff(cap=0.5, base=0.05), retries=3)


def _describe(url: str) -> str:
    """The URL without its credentials, fit for an error message."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(unparsable URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ranked_id(member: bytes) -> str:
    """The session id of a `<order>:<session id>` sorted-set member."""
    return _text(member).split(":", 1)[1]


def _session(fields: Sequence[bytes], message_count: int) -> SessionRecord:
    session_id, key, created_at, updated_at = (_text(f) for f in fields)
    return SessionRecord(
        id=session_id,
        key=key,
        created_at=from_utc_text(created_at),
        updated_at=from_utc_text(updated_at),
        message_count=message_count,
    )


def _decode_message(raw: bytes) -> Message:
    stored = _StoredMessage.model_validate_json(raw)
    return stored.body.model_copy(
        update={"seq": stored.seq, "created_at": stored.created_at.astimezone(UTC)}
    )


def _summary(session_id: str | None, values: Sequence[Any]) -> CostSummary:
    """A summary from the `_TOTAL_FIELDS` of a totals hash; missing fields are zero."""
    calls, input_tokens, output_tokens, cache_read, cache_write, cost_usd, unpriced = (
        0 if v is None else v for v in values
    )
    return CostSummary(
        session_id=session_id,
        calls=int(calls),
        usage=Usage(
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
            cache_read_tokens=int(cache_read),
            cache_write_tokens=int(cache_write),
        ),
        cost_usd=float(cost_usd),
        unpriced_calls=int(unpriced),
    )
