"""The SQL behind `SqliteStore`'s compaction summaries (the table of schema version 5).

A session keeps every summary it was given, one per archive marker (`up_to_seq`); requests use
the one with the highest marker. Each function runs on a connection the caller holds, as in
`_sqlite_schedules.py`.
"""

from __future__ import annotations

from typing import Final

import aiosqlite

from core.errors import StoreError
from core.store._shared import from_utc_text, utc_text
from core.store.base import CompactionSummary

__all__ = ["MIGRATION", "latest_summary", "save_summary"]

MIGRATION: Final = (
    """
    CREATE TABLE summaries (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        up_to_seq INTEGER NOT NULL,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, up_to_seq)
    )
    """,
)


async def save_summary(
    db: aiosqlite.Connection, session_id: str, summary: CompactionSummary
) -> None:
    """Insert the summary, replacing one with the same marker; `StoreError` for no session."""
    rows = await db.execute_fetchall("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
    if next(iter(rows), None) is None:
        raise StoreError(f"cannot save a summary: no session has id {session_id!r}")
    await db.execute(
        "INSERT INTO summaries (session_id, up_to_seq, text, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (session_id, up_to_seq)"
        " DO UPDATE SET text = excluded.text, created_at = excluded.created_at",
        (session_id, summary.up_to_seq, summary.text, utc_text(summary.created_at)),
    )


async def latest_summary(db: aiosqlite.Connection, session_id: str) -> CompactionSummary | None:
    """The summary with the highest marker, or None."""
    rows = await db.execute_fetchall(
        "SELECT up_to_seq, text, created_at FROM summaries"
        " WHERE session_id = ? ORDER BY up_to_seq DESC LIMIT 1",
        (session_id,),
    )
    for up_to_seq, text, created_at in rows:
        return CompactionSummary(
            up_to_seq=up_to_seq,
            text=text,
            created_at=from_utc_text(created_at),
        )
    return None
