"""The `CostLedger` of `SqlStore`: one row per provider call (a NULL cost: no known price)."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

from sqlalchemy import ColumnElement, Float, bindparam, case, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import insert_ignoring
from core.backends.sql.store._tables import costs, sessions
from core.errors import StoreError
from core.messages import Usage
from core.store._shared import check_limit, from_utc_text, utc_text
from core.store.ledger import CostEntry, CostGroup, CostGrouping, CostSummary, Spending

__all__ = ["SqlLedger", "entry_of", "record"]

c = costs.c

# Every summary reads the same aggregates, in the order `_summary` expects. COALESCE: SUM
# over no rows (or only NULL costs) is NULL, and an empty ledger costs 0.
_AGGREGATES: tuple[ColumnElement[Any], ...] = (
    func.count(),
    func.coalesce(func.sum(c.input_tokens), 0),
    func.coalesce(func.sum(c.output_tokens), 0),
    func.coalesce(func.sum(c.cache_read_tokens), 0),
    func.coalesce(func.sum(c.cache_write_tokens), 0),
    func.coalesce(func.sum(c.cost_usd), cast(0.0, Float)),
    func.coalesce(func.sum(case((c.cost_usd.is_(None), 1), else_=0)), 0),
    func.count(func.distinct(case((c.degraded, c.run_id)))),
)

# `at` is fixed-width UTC text, so its first ten characters are the UTC day.
_GROUP_COLUMNS: dict[str, ColumnElement[Any]] = {
    "user": func.coalesce(c.user_key, ""),
    "chat": func.coalesce(c.chat_key, ""),
    "day": func.substr(c.at, 1, 10),
    "model": c.model,
}


def _day_bounds(day: date) -> tuple[str, str]:
    start = datetime.combine(day, time(), tzinfo=UTC)
    return utc_text(start), utc_text(start + timedelta(days=1))


def _sum_cost(where: ColumnElement[bool] | None = None) -> ColumnElement[Any]:
    value = c.cost_usd if where is None else case((where, c.cost_usd))
    return func.coalesce(func.sum(value), cast(0.0, Float))


class SqlLedger(SqlBase):
    """The `CostLedger` of `SqlStore`."""

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger.

        Raises `StoreError` for an unknown session or a naive `entry.at`, and `ValueError` for
        a cost that is not a finite number.
        """
        async with self._begin(f"record a cost for session {entry.session_id!r}") as db:
            await record(db, self._dialect, entry)

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None."""
        query: Select[Any] = select(*_AGGREGATES)
        if session_id is not None:
            query = query.where(c.session_id == session_id)
        whose = "all sessions" if session_id is None else f"session {session_id!r}"
        async with self._read(f"sum the costs of {whose}") as db:
            row = (await db.execute(query)).one()
        return _summary(session_id, tuple(row))

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first (on a tie, the session
        whose newest entry was recorded last)."""
        check_limit(limit)
        async with self._read("sum costs by session") as db:
            rows = await db.execute(
                select(c.session_id, *_AGGREGATES)
                .group_by(c.session_id)
                .order_by(func.max(c.at).desc(), func.max(c.number).desc())
                .limit(limit)
            )
            return [_summary(row[0], tuple(row[1:])) for row in rows]

    async def daily_spend(
        self, day: date, *, user: str | None = None, chat: str | None = None
    ) -> float:
        """The known cost in USD of the calls made on UTC `day`: one person's, one chat's, or
        everyone's. `ValueError` if both are given."""
        if user is not None and chat is not None:
            raise ValueError("daily_spend takes a user or a chat, not both")
        start, end = _day_bounds(day)
        query = select(_sum_cost()).where(c.at >= start, c.at < end)
        if user is not None:
            query = query.where(c.user_key == user)
        elif chat is not None:
            query = query.where(c.chat_key == chat)
        async with self._read(f"sum the spending of {day.isoformat()}") as db:
            return float((await db.execute(query)).scalar_one())

    async def spending(
        self, day: date, *, session_id: str, user: str | None = None, chat: str | None = None
    ) -> Spending:
        """The session's total and the day's three daily sums, in one statement. A person or
        chat not given matches no row: 0."""
        start, end = _day_bounds(day)
        session_total = select(_sum_cost()).where(c.session_id == session_id).scalar_subquery()
        query = select(
            session_total,
            _sum_cost(c.user_key == user) if user is not None else cast(0.0, Float),
            _sum_cost(c.chat_key == chat) if chat is not None else cast(0.0, Float),
            _sum_cost(),
        ).where(c.at >= start, c.at < end)
        async with self._read(f"sum the spending of {day.isoformat()}") as db:
            session, user_daily, chat_daily, global_daily = (await db.execute(query)).one()
        return Spending(
            session=float(session or 0.0),
            user_daily=float(user_daily),
            chat_daily=float(chat_daily),
            global_daily=float(global_daily),
        )

    async def costs_by(self, by: CostGrouping, *, limit: int = 50) -> list[CostGroup]:
        """Totals per person, chat, day or model: days newest first, the others costliest
        first (then by key)."""
        check_limit(limit)
        key = _GROUP_COLUMNS[by].label("group_key")
        cost = _AGGREGATES[5]
        order = (key.desc(),) if by == "day" else (cost.desc(), key.asc())
        async with self._read(f"sum costs by {by}") as db:
            rows = await db.execute(
                select(key, *_AGGREGATES).group_by(key).order_by(*order).limit(limit)
            )
            return [_group(by, tuple(row)) for row in rows]

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded."""
        async with self._read(f"read the cost entries of session {session_id!r}") as db:
            rows = await db.execute(
                select(costs).where(c.session_id == session_id).order_by(c.number)
            )
            return [entry_of(row) for row in rows]


def entry_of(row: Any) -> CostEntry:
    """The `CostEntry` of a row of `costs` (every column selected)."""
    return CostEntry(
        session_id=row.session_id,
        run_id=row.run_id,
        provider=row.provider,
        model=row.model,
        usage=Usage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cache_read_tokens=row.cache_read_tokens,
            cache_write_tokens=row.cache_write_tokens,
        ),
        cost_usd=row.cost_usd,
        at=from_utc_text(row.at),
        user=row.user_key,
        chat=row.chat_key,
        id=row.entry_id,
        degraded=row.degraded,
    )


def _summary(session_id: str | None, row: tuple[Any, ...]) -> CostSummary:
    calls, input_tokens, output_tokens, cache_read, cache_write, cost_usd, unpriced, degraded = row
    return CostSummary(
        session_id=session_id,
        calls=calls,
        usage=Usage(
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
            cache_read_tokens=int(cache_read),
            cache_write_tokens=int(cache_write),
        ),
        cost_usd=float(cost_usd),
        unpriced_calls=int(unpriced),
        degraded_turns=int(degraded),
    )


def _group(by: CostGrouping, row: tuple[Any, ...]) -> CostGroup:
    summary = _summary(None, row[1:])
    return CostGroup(
        by=by,
        key=row[0],
        calls=summary.calls,
        usage=summary.usage,
        cost_usd=summary.cost_usd,
        unpriced_calls=summary.unpriced_calls,
        degraded_turns=summary.degraded_turns,
    )


_SESSION_KNOWN: Final = select(sessions.c.id).where(sessions.c.id == bindparam("id"))


async def record(db: AsyncConnection, dialect: str, entry: CostEntry) -> None:
    """Append one provider call to the ledger (`CostLedger.record_cost`), in the transaction
    of `db`."""
    if entry.cost_usd is not None and not math.isfinite(entry.cost_usd):
        raise ValueError(f"cost_usd must be a finite number, got {entry.cost_usd!r}")
    if entry.at.tzinfo is None:
        raise StoreError("a cost entry's `at` is a naive datetime; it must be aware")
    usage = entry.usage
    known = await db.execute(_SESSION_KNOWN, {"id": entry.session_id})
    if known.first() is None:
        raise StoreError(f"cannot record a cost: no session has id {entry.session_id!r}")
    values = {
        "session_id": entry.session_id,
        "run_id": entry.run_id,
        "provider": entry.provider,
        "model": entry.model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_usd": entry.cost_usd,
        "at": utc_text(entry.at),
        "user_key": entry.user,
        "chat_key": entry.chat,
        "entry_id": entry.id,
        "degraded": entry.degraded,
    }
    # An entry whose id is recorded already (a write tried again) is left as it is.
    await db.execute(insert_ignoring(dialect, costs), values)
