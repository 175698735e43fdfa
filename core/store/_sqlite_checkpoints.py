"""The `CheckpointStore` of `SqliteStore`: turn checkpoints (the table of schema version 6).

One row per turn, keyed by its run key; `running` rows are the ones recovery looks at. Finished
rows are pruned a week after they finished. Each write is one statement (autocommitted): on
aiosqlite every statement is a hand-over to its thread, the cost that counts here.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Final

import aiosqlite

from core.checkpoints import Checkpoint, CheckpointStatus
from core.errors import StoreError
from core.store._shared import check_aware, utc_text
from core.store._sqlite_base import SqliteBase

__all__ = ["MIGRATION", "SqliteCheckpoints"]

log = logging.getLogger(__name__)

# Finished checkpoints are kept this long (for `recover` to say what happened), then pruned,
# by a `finish_checkpoint` at most this often.
_KEEP_FINISHED: Final = timedelta(days=7)
_PRUNE_EVERY: Final = timedelta(minutes=10)

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


async def _save_checkpoint(db: aiosqlite.Connection, checkpoint: Checkpoint) -> None:
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


async def _get_checkpoint(db: aiosqlite.Connection, run_key: str) -> Checkpoint | None:
    """The checkpoint of `run_key`, or None."""
    rows = await db.execute_fetchall("SELECT body FROM checkpoints WHERE run_key = ?", (run_key,))
    for (body,) in rows:
        return Checkpoint.model_validate_json(body)
    return None


class SqliteCheckpoints(SqliteBase):
    """The `CheckpointStore` of `SqliteStore`."""

    # When finished checkpoints were last pruned by this store (None: not yet).
    _pruned_at: datetime | None = None

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
        async with self._statement(f"save checkpoint {checkpoint.run_key!r}"):
            await _save_checkpoint(self._db, checkpoint)

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        async with self._read(f"read checkpoint {run_key!r}"):
            return await _get_checkpoint(self._db, run_key)

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        async with self._read("list incomplete checkpoints"):
            sql = "SELECT body FROM checkpoints WHERE status = 'running'"
            params: tuple[str, ...] = ()
            if older_than is not None:
                sql += " AND updated_at < ?"
                params = (utc_text(older_than),)
            rows = await self._db.execute_fetchall(sql + " ORDER BY started_at, run_key", params)
            return [Checkpoint.model_validate_json(body) for (body,) in rows]

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status; False if there is none.

        One statement: the columns and the same two fields of the JSON body are set where
        the row is. Finished rows past their week go at most once every `_PRUNE_EVERY`.
        """
        now = self._now()
        async with self._statement(f"finish checkpoint {run_key!r}"):
            finished = await self._db.execute(
                "UPDATE checkpoints SET status = ?, updated_at = ?,"
                " body = json_set(body, '$.status', ?, '$.updated_at', ?) WHERE run_key = ?",
                (status, utc_text(now), status, now.isoformat(), run_key),
            )
        if self._pruned_at is None or now - self._pruned_at >= _PRUNE_EVERY:
            self._pruned_at = now
            try:
                async with self._statement("prune finished checkpoints"):
                    await self._db.execute(
                        "DELETE FROM checkpoints WHERE status != 'running' AND updated_at < ?",
                        (utc_text(now - _KEEP_FINISHED),),
                    )
            except StoreError as exc:  # the finish is made; the prune is tried again later
                log.warning("%s", exc)
                self._pruned_at = None
        return finished.rowcount == 1
