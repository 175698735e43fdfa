"""The queue file's connection: `sqlite3` called on the event loop's thread.

The work queues and mailboxes (`core/backends/sql/bus.py`, `mailboxes.py`) run a few short
statements per call on a local file in WAL mode; each statement takes microseconds. Handing
every one of them to a connection thread (aiosqlite) cost a thread switch both ways per
statement, about 30 a piped `switchboard chat` turn. As the SQL store does
([decision 0028](../../../docs/decisions/0028-sqlite-in-line.md)), the statements run in line
and only what can wait long leaves the loop:

- `BEGIN IMMEDIATE` is tried without waiting; if another connection holds the write lock (the
  store's engine on the same data file in `serve`, another process), it is taken in a thread
  that waits up to the busy timeout, the loop running meanwhile.
- A commit that wrote (it waits for the disk), in a thread.

The caller (`SqliteQueueFile`) keeps one transaction at a time on the connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from core.sqlite_file import (
    BUSY_TIMEOUT_MS,
    MEMORY,
    begin_at_once,
    begin_waiting,
    in_thread,
    is_busy,
    prepare_file,
)

__all__ = ["InlineFile"]


class InlineFile:
    """One `sqlite3` connection to a data file in autocommit mode, WAL on, used in line."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection: sqlite3.Connection | None = connection
        # The connection's rows changed when it last committed (`sqlite3`'s count).
        self._changes = connection.total_changes

    @classmethod
    async def open(cls, path: Path | str) -> InlineFile:
        """Open `path` (its folder and the file made private when new). Raises `OSError` or
        `sqlite3.Error`, for the caller to say what could not be opened."""
        target = str(path)
        if target != MEMORY:
            await asyncio.to_thread(prepare_file, target)
        # isolation_level None: transactions are begun and ended here. Used by the loop's
        # thread, and by a thread of `asyncio.to_thread` while the loop waits for it.
        connection = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except BaseException:
            connection.close()
            raise
        return cls(connection)

    async def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        """Run one statement; its cursor (rows, `rowcount`, `lastrowid`)."""
        return self._sqlite().execute(sql, parameters)

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        """Run one statement; all its rows."""
        return self._sqlite().execute(sql, parameters).fetchall()

    async def begin(self) -> None:
        """`BEGIN IMMEDIATE`, the loop never waiting for another connection's lock."""
        raw = self._sqlite()
        try:
            begin_at_once(raw)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or not await in_thread(begin_waiting, raw):
                raise

    async def commit(self) -> None:
        """Commit: a transaction that wrote in a thread (it waits for the disk), else in line."""
        raw = self._sqlite()
        if raw.total_changes == self._changes:
            raw.execute("COMMIT")
            return
        await in_thread(raw.execute, "COMMIT")
        self._changes = raw.total_changes

    async def rollback(self) -> None:
        """Roll back the transaction, if one is open."""
        raw = self._sqlite()
        if raw.in_transaction:
            raw.execute("ROLLBACK")

    async def close(self) -> None:
        """Close the connection (again: nothing)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _sqlite(self) -> sqlite3.Connection:
        if self._connection is None:
            raise sqlite3.ProgrammingError("the queue file is closed")
        return self._connection
