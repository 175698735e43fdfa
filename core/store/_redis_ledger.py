"""The `CostLedger` of `RedisStore`: per session a list of entries and a hash of running
totals, one hash of the totals of all sessions, and the sessions ranked by their latest charge.
Recording is one script, so the totals never disagree with the entries."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, date
from typing import Any, Final, cast, get_args
from uuid import uuid4

from core.errors import StoreError
from core.messages import Usage
from core.store._redis_base import RANKED_MEMBER, RECEIPT_SECONDS, RedisBase, ranked_id
from core.store._shared import check_limit, epoch_micros
from core.store.ledger import CostEntry, CostGroup, CostGrouping, CostSummary, Spending

__all__ = ["RedisLedger"]

# KEYS: the session's cost totals, the day's spend hash. ARGV: the day's three fields.
# Returns the session's cost and the three daily sums (nil for none): one command rather than
# an HGET and an HMGET, as it is read before every model call.
_SPENDING: Final = """
local day = redis.call('HMGET', KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return {redis.call('HGET', KEYS[1], 'cost_usd'), day[1], day[2], day[3]}
"""

# KEYS: session, costs, cost_totals, all_cost_totals, sessions_with_costs, cost_order,
#       write_receipt, the group totals of the entry's user, chat, day and model (8-11),
#       the sets of users, chats, days and models (12-15), the day's spend hash (16)
# ARGV: session id, entry (JSON), input, output, cache read, cache write tokens,
#       cost in USD ("" when unpriced), at (epoch microseconds), receipt lifetime (s),
#       the entry's user, chat, day and model (10-13; "" for no user or chat),
#       the day's spend hash lifetime (s)
# Returns 1 (also on a replay), or nil for an unknown session.
_RECORD_COST: Final = f"""
if redis.call('EXISTS', KEYS[7]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('RPUSH', KEYS[2], ARGV[2])
local order = redis.call('INCR', KEYS[6])
for _, totals in ipairs({{KEYS[3], KEYS[4], KEYS[8], KEYS[9], KEYS[10], KEYS[11]}}) do
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
for i = 0, 3 do redis.call('SADD', KEYS[12 + i], ARGV[10 + i]) end
if ARGV[7] ~= '' then
  redis.call('HINCRBYFLOAT', KEYS[16], 'all', ARGV[7])
  if ARGV[10] ~= '' then redis.call('HINCRBYFLOAT', KEYS[16], 'user:' .. ARGV[10], ARGV[7]) end
  if ARGV[11] ~= '' then redis.call('HINCRBYFLOAT', KEYS[16], 'chat:' .. ARGV[11], ARGV[7]) end
  redis.call('EXPIRE', KEYS[16], ARGV[14])
end
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


# The budgets read only today's spend; a week leaves room for clocks and questions.
_DAILY_SPEND_SECONDS: Final = 7 * 24 * 3600

_GROUPINGS: Final[tuple[CostGrouping, ...]] = get_args(CostGrouping)


class RedisLedger(RedisBase):
    """The `CostLedger` of `RedisStore`."""

    async def record_cost(self, entry: CostEntry, *, receipt: str | None = None) -> None:
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
        groups = dict(
            zip(
                _GROUPINGS,
                (
                    entry.user or "",
                    entry.chat or "",
                    entry.at.astimezone(UTC).date().isoformat(),
                    entry.model,
                ),
                strict=True,
            )
        )
        with self._translated(f"record a cost for session {session_id!r}"):
            recorded = await self._script(_RECORD_COST)(
                keys=[
                    self._keys.session(session_id),
                    self._keys.costs(session_id),
                    self._keys.cost_totals(session_id),
                    self._keys.all_cost_totals(),
                    self._keys.sessions_with_costs(),
                    self._keys.cost_order(),
                    # A call made again with the caller's receipt finds the first one's answer.
                    self._keys.write_receipt(f"c:{receipt}" if receipt else uuid4().hex),
                    *(self._keys.cost_group_totals(by, key) for by, key in groups.items()),
                    *(self._keys.cost_groups(by) for by in groups),
                    self._keys.daily_spend(groups["day"]),
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
                    *groups.values(),
                    _DAILY_SPEND_SECONDS,
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
        with self._translated(f"sum the costs of {whose}"):
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
        with self._translated("sum costs by session"):
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

    async def daily_spend(
        self, day: date, *, user: str | None = None, chat: str | None = None
    ) -> float:
        """The known cost in USD of the calls made on UTC `day`: one person's (`user`), one
        chat's (`chat`), or everyone's (neither). `ValueError` if both are given."""
        if user is not None and chat is not None:
            raise ValueError("daily_spend takes a user or a chat, not both")
        field = (
            "all"
            if user is None and chat is None
            else (f"user:{user}" if user is not None else f"chat:{chat}")
        )
        with self._translated(f"sum the spending of {day.isoformat()}"):
            value = await self._client.hget(self._keys.daily_spend(day.isoformat()), field)
        return 0.0 if value is None else float(value)

    async def spending(
        self, day: date, *, session_id: str, user: str | None = None, chat: str | None = None
    ) -> Spending:
        """The session's total and the day's three daily sums, in one round trip."""
        fields = ["all", f"user:{user}", f"chat:{chat}"]
        with self._translated(f"read the spending of {day.isoformat()}"):
            session, everyone, by_user, by_chat = await self._script(_SPENDING)(
                keys=[self._keys.cost_totals(session_id), self._keys.daily_spend(day.isoformat())],
                args=fields,
            )

        def usd(value: Any) -> float:
            return 0.0 if value is None else float(value)

        return Spending(
            session=usd(session),
            user_daily=usd(by_user) if user is not None else 0.0,
            chat_daily=usd(by_chat) if chat is not None else 0.0,
            global_daily=usd(everyone),
        )

    async def costs_by(self, by: CostGrouping, *, limit: int = 50) -> list[CostGroup]:
        """Totals per person, chat, day or model: days newest first, the others costliest
        first (then by key)."""
        check_limit(limit)
        with self._translated(f"sum costs by {by}"):
            members = cast(set[bytes], await self._client.smembers(self._keys.cost_groups(by)))
            keys = [m.decode() for m in members]
            async with self._client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.hmget(self._keys.cost_group_totals(by, key), list(_TOTAL_FIELDS))
                rows = await pipe.execute()
        groups = [_group(by, key, row) for key, row in zip(keys, rows, strict=True)]
        if by == "day":
            groups.sort(key=lambda g: g.key, reverse=True)
        else:
            groups.sort(key=lambda g: (-g.cost_usd, g.key))
        return groups[:limit]

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded."""
        with self._translated(f"read the cost entries of session {session_id!r}"):
            raw = cast(list[bytes], await self._client.lrange(self._keys.costs(session_id), 0, -1))
        return [CostEntry.model_validate_json(item) for item in raw]


def _group(by: CostGrouping, key: str, values: Sequence[Any]) -> CostGroup:
    summary = _summary(None, values)
    return CostGroup(
        by=by,
        key=key,
        calls=summary.calls,
        usage=summary.usage,
        cost_usd=summary.cost_usd,
        unpriced_calls=summary.unpriced_calls,
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
