"""`SqliteReplyRecords`: reply records in the embedded deployment's SQLite file.

Every gateway of the embedded deployment runs in one process, so the hold on a reply is an
asyncio lock; the records are written to their own table so a restart still knows what was
shown (a redelivered final reply is recognised). Rows older than a day are pruned on open and
every `_PRUNE_EVERY` saves.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import aiosqlite
from pydantic import ValidationError

from core.errors import ChannelError
from core.store._connection import open_connection
from core.store.replies import RECORD_TTL_SECONDS, LocalHolds, ReplyRecord

__all__ = ["SqliteReplyRecords"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS reply_records ("
    " key TEXT PRIMARY KEY, body TEXT NOT NULL, updated_at REAL NOT NULL)"
)


_PRUNE_EVERY = 1000


class SqliteReplyRecords:
    """Reply records in a SQLite file (`await SqliteReplyRecords.open(path)`, then `close`)."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._holds = LocalHolds()
        self._saves = 0

    @classmethod
    async def open(cls, path: Path | str) -> SqliteReplyRecords:
        """Open the database (the store's file is fine: the table is this concern's own)."""
        target = str(path)
        try:
            db = await open_connection(target)
        except (OSError, sqlite3.Error) as exc:
            raise ChannelError(f"cannot open reply records at {target}: {exc}") from exc
        try:
            await db.execute(_SCHEMA)
            await _prune(db)
        except BaseException:
            await db.close()
            raise
        return cls(db)

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, if any."""
        try:
            cursor = await self._db.execute("SELECT body FROM reply_records WHERE key = ?", (key,))
            row = await cursor.fetchone()
        except sqlite3.Error as exc:
            raise ChannelError(f"cannot read the record of reply {key}: {exc}") from exc
        if row is None:
            return None
        try:
            return ReplyRecord.model_validate_json(row[0])
        except ValidationError:
            return None

    async def save(self, record: ReplyRecord) -> None:
        """Store `record`."""
        try:
            await self._db.execute(
                "INSERT INTO reply_records (key, body, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET body = excluded.body,"
                " updated_at = excluded.updated_at",
                (record.key, record.model_dump_json(), time.time()),
            )
            self._saves += 1
            if self._saves % _PRUNE_EVERY == 0:
                await _prune(self._db)
        except sqlite3.Error as exc:
            raise ChannelError(f"cannot save the record of reply {record.key}: {exc}") from exc

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` (one process: an asyncio lock)."""
        return self._holds.hold(key)


async def _prune(db: aiosqlite.Connection) -> None:
    """Forget records older than a day."""
    cutoff = time.time() - RECORD_TTL_SECONDS
    await db.execute("DELETE FROM reply_records WHERE updated_at < ?", (cutoff,))
