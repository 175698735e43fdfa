"""The `CostLedger` of `SqliteStore`: one row per provider call (a NULL cost: no known price)."""

from __future__ import annotations

import math
import sqlite3
from typing import Any, Final

from core.errors import StoreError
from core.messages import Usage
from core.store._shared import check_limit, from_utc_text, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.ledger import CostEntry, CostSummary

__all__ = ["SqliteLedger"]

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

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger.

        Raises `StoreError` for an unknown session or a naive `entry.at`, and `ValueError` for
        a cost that is not a finite number (SQLite would store NaN as NULL: "unpriced").
        """
        if entry.cost_usd is not None and not math.isfinite(entry.cost_usd):
            raise ValueError(f"cost_usd must be a finite number, got {entry.cost_usd!r}")
        if entry.at.tzinfo is None:
            raise StoreError("a cost entry's `at` is a naive datetime; it must be aware")
        usage = entry.usage
        async with self._write(f"record a cost for session {entry.session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT 1 FROM sessions WHERE id = ?", (entry.session_id,)
            )
            if next(iter(rows), None) is None:
                raise StoreError(f"cannot record a cost: no session has id {entry.session_id!r}")
            await self._db.execute(
                "INSERT INTO costs (session_id, run_id, provider, model, input_tokens,"
                " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.session_id,
                    entry.run_id,
                    entry.provider,
                    entry.model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    entry.cost_usd,
                    utc_text(entry.at),
                ),
            )

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

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded."""
        async with self._read(f"read the cost entries of session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT session_id, run_id, provider, model, input_tokens, output_tokens,"
                " cache_read_tokens, cache_write_tokens, cost_usd, at FROM costs"
                " WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
        return [_entry_from_row(row) for row in rows]


def _entry_from_row(row: sqlite3.Row | tuple[Any, ...]) -> CostEntry:
    session_id, run_id, provider, model, inputs, outputs, cache_read, cache_write, cost, at = row
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
