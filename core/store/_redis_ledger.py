"""The `CostLedger` of `RedisStore`: per session a list of entries and a hash of running
totals, one hash of the totals of all sessions, and the sessions ranked by their latest charge.
Recording is one script, so the totals never disagree with the entries."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, cast
from uuid import uuid4

from core.errors import StoreError
from core.messages import Usage
from core.store._redis_base import RANKED_MEMBER, RECEIPT_SECONDS, RedisBase, ranked_id
from core.store._shared import check_limit, epoch_micros
from core.store.ledger import CostEntry, CostSummary

__all__ = ["RedisLedger"]

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
local member = {RANKED_MEMBER.format(order="order", session_id="ARGV[1]")}
redis.call('ZADD', KEYS[5], score, member)
redis.call('HSET', KEYS[3], 'latest_at', score, 'member', member)
redis.call('SET', KEYS[7], 1, 'EX', ARGV[9])
return 1
"""

_TOTAL_FIELDS: Final = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "unpriced_calls",
)


class RedisLedger(RedisBase):
    """The `CostLedger` of `RedisStore`."""

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
            recorded = await self._script(_RECORD_COST)(
                keys=[
                    self._keys.session(session_id),
                    self._keys.costs(session_id),
                    self._keys.cost_totals(session_id),
                    self._keys.all_cost_totals(),
                    self._keys.sessions_with_costs(),
                    self._keys.cost_order(),
                    self._keys.write_receipt(uuid4().hex),
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
                    RECEIPT_SECONDS,
                ],
            )
        if recorded is None:
            raise StoreError(f"cannot record a cost: no session has id {session_id!r}")

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None.

        A session without ledger entries (or an unknown one) sums to zero.
        """
        key = (
            self._keys.all_cost_totals()
            if session_id is None
            else self._keys.cost_totals(session_id)
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
                await self._client.zrevrange(self._keys.sessions_with_costs(), 0, limit - 1),
            )
            ids = [ranked_id(m) for m in members]
            async with self._client.pipeline(transaction=True) as pipe:
                for session_id in ids:
                    pipe.hmget(self._keys.cost_totals(session_id), list(_TOTAL_FIELDS))
                rows = await pipe.execute()
            return [_summary(session_id, row) for session_id, row in zip(ids, rows, strict=True)]

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded."""
        async with self._translated(f"read the cost entries of session {session_id!r}"):
            raw = cast(list[bytes], await self._client.lrange(self._keys.costs(session_id), 0, -1))
        return [CostEntry.model_validate_json(item) for item in raw]


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
