"""The SQL behind `SqliteStore`'s turn checkpoints (the table of schema version 6).

One row per turn, keyed by its run key; `running` rows are the ones recovery looks at. Finished
rows are pruned a week after they finished. Each function runs on a connection the caller
holds, as in `_sqlite_schedules.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import aiosqlite

from core.checkpoints import Checkpoint, CheckpointStatus
from core.store._shared import utc_text

__all__ = [
    "MIGRATION",
    "finish_checkpoint",
    "get_checkpoint",
    "incomplete_checkpoints",
    "save_checkpoint",
]

# Finished checkpoints are kept this long (for `recover` to say what happened), then pruned.
_KEEP_FINISHED: Final = timedelta(days=7)

MIGRATION: Final = (
    """
    CREATE TABLE checkpoints (
        run_key TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        body TEXT NOT NULL
    )
    """,
    "CREATE INDEX checkpoints_by_status ON checkpoints (status, updated_at)",
)


async def save_checkpoint(db: aiosqlite.Connection, checkpoint: Checkpoint) -> None:
    """Insert the checkpoint, or replace the stored one with the same run key."""
    await db.execute(
        "INSERT INTO checkpoints (run_key, status, started_at, updated_at, body)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_key) DO UPDATE SET"
        " status = excluded.status, started_at = excluded.started_at,"
        " updated_at = excluded.updated_at, body = excluded.body",
        (
            checkpoint.run_key,
            checkpoint.status,
            utc_text(checkpoint.started_at),
            utc_text(checkpoint.updated_at),
            checkpoint.model_dump_json(),
        ),
    )


async def get_checkpoint(db: aiosqlite.Connection, run_key: str) -> Checkpoint | None:
    """The checkpoint of `run_key`, or None."""
    rows = await db.execute_fetchall("SELECT body FROM checkpoints WHERE run_key = ?", (run_key,))
    for (body,) in rows:
        return Checkpoint.model_validate_json(body)
    return None


async def incomplete_checkpoints(
    db: aiosqlite.Connection, older_than: datetime | None
) -> list[Checkpoint]:
    """`running` checkpoints (last updated before `older_than`, when given), oldest first."""
    sql = "SELECT body FROM checkpoints WHERE status = 'running'"
    params: tuple[str, ...] = ()
    if older_than is not None:
        sql += " AND updated_at < ?"
        params = (utc_text(older_than),)
    rows = await db.execute_fetchall(sql + " ORDER BY started_at, run_key", params)
    return [Checkpoint.model_validate_json(body) for (body,) in rows]


async def finish_checkpoint(
    db: aiosqlite.Connection, run_key: str, status: CheckpointStatus, now: datetime
) -> bool:
    """Set the checkpoint's status (and `updated_at` to `now`); False if there is none."""
    found = await get_checkpoint(db, run_key)
    if found is None:
        return False
    await save_checkpoint(db, found.model_copy(update={"status": status, "updated_at": now}))
    await db.execute(
        "DELETE FROM checkpoints WHERE status != 'running' AND updated_at < ?",
        (utc_text(now - _KEEP_FINISHED),),
    )
    return True
