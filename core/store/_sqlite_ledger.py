"""The `CostLedger` of `SqliteStore`: one row per provider call (a NULL cost: no known price)."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

from core.errors import StoreError
from core.messages import Usage
from core.store._shared import check_limit, from_utc_text, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.ledger import CostEntry, CostGroup, CostGrouping, CostSummary, Spending

__all__ = ["MIGRATION", "SqliteLedger"]

# Who each call answered and where, so spending counts per person and per chat (across `/new`,
# which starts a new session), and the indexes the daily budgets read by.
MIGRATION: Final = (
    "ALTER TABLE costs ADD COLUMN user_key TEXT",
    "ALTER TABLE costs ADD COLUMN chat_key TEXT",
    "CREATE INDEX costs_by_user ON costs (user_key, at)",
    "CREATE INDEX costs_by_chat ON costs (chat_key, at)",
    "CREATE INDEX costs_by_at ON costs (at)",
)

# The column each grouping of `costs_by` reads; `at` is fixed-width UTC text, so its first
# ten characters are the UTC day.
_GROUP_COLUMNS: Final[dict[str, str]] = {
    "user": "COALESCE(user_key, '')",
    "chat": "COALESCE(chat_key, '')",
    "day": "substr(at, 1, 10)",
    "model": "model",
}

# Every ledger summary reads the same aggregates, in the order `_summary_from_row` expects.
# COALESCE: SUM over no rows (or only NULL costs) is NULL, and an empty ledger costs 0.
_COST_AGGREGATES: Final = (
    "COUNT(*),"
    " COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
    " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
    " COALESCE(SUM(cost_usd), 0.0), COALESCE(SUM(cost_usd IS NULL), 0)"
)


class SqliteLedger(SqliteBase):
    """The `CostLedger` of `SqliteStore`."""

    async def record_cost(self, entry: CostEntry, *, receipt: str | None = None) -> None:
        """Append one provider call to the cost ledger.

        Raises `StoreError` for an unknown session or a naive `entry.at`, and `ValueError` for
        a cost that is not a finite number (SQLite would store NaN as NULL: "unpriced").
        `receipt` needs no record here: a call that raised wrote nothing.
        """
        if entry.cost_usd is not None and not math.isfinite(entry.cost_usd):
            raise ValueError(f"cost_usd must be a finite number, got {entry.cost_usd!r}")
        if entry.at.tzinfo is None:
            raise StoreError("a cost entry's `at` is a naive datetime; it must be aware")
        usage = entry.usage
        action = f"record a cost for session {entry.session_id!r}"
        # Stored only if the session is known.
        async with self._statement(action):
            stored = await self._db.execute(
                "INSERT INTO costs (session_id, run_id, provider, model, input_tokens,"
                " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, at,"
                " user_key, chat_key) SELECT s.id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
                " FROM sessions AS s WHERE s.id = ?",
                (
                    entry.run_id,
                    entry.provider,
                    entry.model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    entry.cost_usd,
                    utc_text(entry.at),
                    entry.user,
                    entry.chat,
                    entry.session_id,
                ),
            )
        if stored.rowcount != 1:
            raise StoreError(f"cannot record a cost: no session has id {entry.session_id!r}")

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None.

        A session without ledger entries (or an unknown one) sums to zero.
        """
        query = f"SELECT {_COST_AGGREGATES} FROM costs"
        params: tuple[str, ...] = ()
        if session_id is not None:
            # A separate WHERE (not `? IS NULL OR ...`) so SQLite can use costs_by_session.
            query += " WHERE session_id = ?"
            params = (session_id,)
        whose = "all sessions" if session_id is None else f"session {session_id!r}"
        async with self._read(f"sum the costs of {whose}"):
            rows = await self._db.execute_fetchall(query, params)
        return _summary_from_row(session_id, next(iter(rows)))

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first.

        Only sessions with ledger entries appear. "Most recently charged" is the latest entry
        `at`; on a tie the session whose newest entry was recorded last comes first.
        """
        check_limit(limit)
        async with self._read("sum costs by session"):
            rows = await self._db.execute_fetchall(
                f"SELECT session_id, {_COST_AGGREGATES} FROM costs GROUP BY session_id"
                " ORDER BY MAX(at) DESC, MAX(id) DESC LIMIT ?",
                (limit,),
            )
        return [_summary_from_row(row[0], row[1:]) for row in rows]

    async def daily_spend(
        self, day: date, *, user: str | None = None, chat: str | None = None
    ) -> float:
        """The known cost in USD of the calls made on UTC `day`: one person's (`user`), one
        chat's (`chat`), or everyone's (neither). `ValueError` if both are given."""
        if user is not None and chat is not None:
            raise ValueError("daily_spend takes a user or a chat, not both")
        start = datetime.combine(day, time(), tzinfo=UTC)
        query = "SELECT COALESCE(SUM(cost_usd), 0.0) FROM costs WHERE at >= ? AND at < ?"
        params: tuple[str, ...] = (utc_text(start), utc_text(start + timedelta(days=1)))
        if user is not None:
            query += " AND user_key = ?"
            params += (user,)
        elif chat is not None:
            query += " AND chat_key = ?"
            params += (chat,)
        async with self._read(f"sum the spending of {day.isoformat()}"):
            rows = await self._db.execute_fetchall(query, params)
        return float(next(iter(rows))[0])

    async def spending(
        self, day: date, *, session_id: str, user: str | None = None, chat: str | None = None
    ) -> Spending:
        """The session's total and the day's three daily sums, in one statement (budgets ask
        before every model call). A person or chat not given matches no row: 0."""
        start = datetime.combine(day, time(), tzinfo=UTC)
        async with self._read(f"sum the spending of {day.isoformat()}"):
            rows = await self._db.execute_fetchall(
                "SELECT (SELECT COALESCE(SUM(cost_usd), 0.0) FROM costs WHERE session_id = ?),"
                " COALESCE(SUM(CASE WHEN user_key = ? THEN cost_usd END), 0.0),"
                " COALESCE(SUM(CASE WHEN chat_key = ? THEN cost_usd END), 0.0),"
                " COALESCE(SUM(cost_usd), 0.0)"
                " FROM costs WHERE at >= ? AND at < ?",
                (session_id, user, chat, utc_text(start), utc_text(start + timedelta(days=1))),
            )
        session, user_daily, chat_daily, global_daily = next(iter(rows))
        return Spending(
            session=float(session),
            user_daily=float(user_daily),
            chat_daily=float(chat_daily),
            global_daily=float(global_daily),
        )

    async def costs_by(self, by: CostGrouping, *, limit: int = 50) -> list[CostGroup]:
        """Totals per person, chat, day or model: days newest first, the others costliest
        first (then by key)."""
        check_limit(limit)
        column = _GROUP_COLUMNS[by]
        order = "1 DESC" if by == "day" else "7 DESC, 1 ASC"
        async with self._read(f"sum costs by {by}"):
            rows = await self._db.execute_fetchall(
                f"SELECT {column}, {_COST_AGGREGATES} FROM costs GROUP BY 1"
                f" ORDER BY {order} LIMIT ?",
                (limit,),
            )
        return [_group_from_row(by, row) for row in rows]

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded."""
        async with self._read(f"read the cost entries of session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT session_id, run_id, provider, model, input_tokens, output_tokens,"
                " cache_read_tokens, cache_write_tokens, cost_usd, at, user_key, chat_key"
                " FROM costs WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
        return [_entry_from_row(row) for row in rows]


def _entry_from_row(row: sqlite3.Row | tuple[Any, ...]) -> CostEntry:
    (
        session_id,
        run_id,
        provider,
        model,
        inputs,
        outputs,
        cache_read,
        cache_write,
        cost,
        at,
        user,
        chat,
    ) = row
    return CostEntry(
        session_id=session_id,
        run_id=run_id,
        provider=provider,
        model=model,
        usage=Usage(
            input_tokens=inputs,
            output_tokens=outputs,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        ),
        cost_usd=cost,
        at=from_utc_text(at),
        user=user,
        chat=chat,
    )


def _summary_from_row(session_id: str | None, row: sqlite3.Row | tuple[Any, ...]) -> CostSummary:
    calls, input_tokens, output_tokens, cache_read, cache_write, cost_usd, unpriced = row
    return CostSummary(
        session_id=session_id,
        calls=calls,
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        ),
        cost_usd=cost_usd,
        unpriced_calls=unpriced,
    )


def _group_from_row(by: CostGrouping, row: sqlite3.Row | tuple[Any, ...]) -> CostGroup:
    summary = _summary_from_row(None, row[1:])
    return CostGroup(
        by=by,
        key=row[0],
        calls=summary.calls,
        usage=summary.usage,
        cost_usd=summary.cost_usd,
        unpriced_calls=summary.unpriced_calls,
    )
