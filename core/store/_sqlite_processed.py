"""The `ProcessedMarks` of `SqliteStore`: one row per handled inbound message."""

from __future__ import annotations

from core.store._shared import utc_text
from core.store._sqlite_base import SqliteBase

__all__ = ["SqliteProcessed"]


class SqliteProcessed(SqliteBase):
    """The `ProcessedMarks` of `SqliteStore`."""

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was."""
        async with self._statement(f"mark {key!r} processed"):
            cursor = await self._db.execute(
                "INSERT OR IGNORE INTO processed (key, at) VALUES (?, ?)",
                (key, utc_text(self._now())),
            )
            return cursor.rowcount == 1

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before."""
        async with self._read(f"check whether {key!r} was processed"):
            rows = await self._db.execute_fetchall("SELECT 1 FROM processed WHERE key = ?", (key,))
        return next(iter(rows), None) is not None
