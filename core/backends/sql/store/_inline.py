"""The SQL store's SQLite connections: `sqlite3` called on the event loop's thread.

aiosqlite runs each call of a connection (a cursor made, a statement executed, its rows
fetched, the cursor closed, a commit) in a thread of its own and hands the answer back to the
loop: about 105 hand-offs a W1 turn, each a thread switch both ways (decision 0028,
docs/decisions/0028-sqlite-in-line.md). SQLite is a library on a local file, and with WAL a
statement of the store takes microseconds, so these connections have the shape SQLAlchemy's
aiosqlite dialect drives (`connect_inline` is its `async_creator`; the calls are those of
`sqlalchemy.connectors.asyncio.AsyncIODBAPIConnection` and `...Cursor`) and run each call in
line: a coroutine that calls `sqlite3` and returns. The store's code is the same on both
databases.

What could wait long stays off the loop:

- The write lock. A write transaction begins with `BEGIN IMMEDIATE` (`begin_immediate`); it
  is tried without waiting, and if another connection holds the lock (the bus's connection to
  the same file, whose transaction needs the loop to go on, or another process), it is taken
  in a thread that waits up to the busy timeout, the loop running meanwhile.
- A commit that wrote (it waits for the disk), in a thread.
- Compaction after an erasure (`VACUUM`): `compact`, in a thread.

An engine's write transactions take turns on an `asyncio.Lock` (`writers`) before SQLite's
lock, so only a connection of another engine or process is ever waited for in a thread. A
transaction of the store awaits nothing but its own statements.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Self

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import await_

from core.sqlite_file import begin_at_once, begin_waiting, in_thread, is_busy

__all__ = [
    "InlineConnection",
    "begin_immediate",
    "begin_reading",
    "compact",
    "connect_inline",
]


class _Cursor:
    """A `sqlite3` cursor with the awaitable calls of an asyncio driver's."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        """The columns of the last statement's rows (DB-API)."""
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        """The rows the last statement changed (DB-API)."""
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        """The row id of the last row inserted (DB-API)."""
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        """How many rows `fetchmany` brings by default (DB-API)."""
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, operation: str, parameters: Any = ()) -> Self:
        """Run one statement."""
        self._cursor.execute(operation, parameters)
        return self

    async def executemany(self, operation: str, parameters: Iterable[Any]) -> Self:
        """Run one statement for each set of parameters."""
        self._cursor.executemany(operation, parameters)
        return self

    async def fetchone(self) -> Any:
        """The next row, or None."""
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        """Up to `size` rows."""
        return self._cursor.fetchmany(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> Sequence[Any]:
        """The rows left."""
        return self._cursor.fetchall()

    async def nextset(self) -> None:
        """SQLite has one result set per statement."""

    async def close(self) -> None:
        """Close the cursor."""
        self._cursor.close()


class InlineConnection:
    """A `sqlite3` connection with the awaitable calls SQLAlchemy's aiosqlite dialect makes."""

    def __init__(self, connection: sqlite3.Connection, writers: asyncio.Lock) -> None:
        """`writers`: the lock its engine's write transactions take turns on."""
        self.dbapi_connection: sqlite3.Connection | None = connection
        self.writers = writers
        # Whether this connection's write transaction holds `writers`.
        self.writing = False
        # The connection's rows changed when it last committed (`sqlite3`'s count).
        self._changes = connection.total_changes

    @property
    def _connection(self) -> sqlite3.Connection | None:
        # What the dialect looks at to tell a closed connection (aiosqlite's own name).
        return self.dbapi_connection

    @property
    def isolation_level(self) -> str | None:
        """Always None: the driver begins no transaction of its own (`_engine.py` does)."""
        return None

    def cursor(self) -> _Cursor:
        """A new cursor (awaited as a context by the dialect)."""
        return _Cursor(self.sqlite().cursor())

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        """Register a SQL function (the dialect's `regexp` and `floor`)."""
        self.sqlite().create_function(*args, **kwargs)

    async def commit(self) -> None:
        """Commit the transaction: one that wrote in a thread (the commit waits for the disk,
        milliseconds on a busy one), one that only read in line."""
        try:
            connection = self.sqlite()
            if connection.total_changes == self._changes:
                connection.commit()
                return
            await in_thread(connection.commit)
            self._changes = connection.total_changes
        finally:
            self.done_writing()

    async def rollback(self) -> None:
        """Roll the transaction back."""
        try:
            self.sqlite().rollback()
        finally:
            self.done_writing()

    async def close(self) -> None:
        """Close the connection (again: nothing)."""
        self.stop()

    def stop(self) -> None:
        """Close at once (the dialect's terminate)."""
        self.done_writing()
        if self.dbapi_connection is not None:
            self.dbapi_connection.close()
            self.dbapi_connection = None

    def done_writing(self) -> None:
        """The write transaction has ended: the next writer's turn."""
        if self.writing:
            self.writing = False
            self.writers.release()

    def sqlite(self) -> sqlite3.Connection:
        """The `sqlite3` connection; `ValueError` once closed (aiosqlite's error)."""
        if self.dbapi_connection is None:
            raise ValueError("no active connection")
        return self.dbapi_connection


async def connect_inline(path: str, writers: asyncio.Lock) -> InlineConnection:
    """A connection to the SQLite database at `path` (`:memory:` too), used in line; its
    write transactions take turns with those of the other connections given `writers`."""
    # isolation_level None: `_engine.py` begins and ends every transaction itself. Used by
    # the loop's thread, and by a thread of `asyncio.to_thread` while the loop waits for it.
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return InlineConnection(connection, writers)


def begin_immediate(connection: Connection) -> None:
    """Begin a write transaction on `connection` without the loop waiting for the lock.

    The engine's writers take turns on the loop first (one at a time: a commit, in a thread,
    lets the loop go on). Then SQLite's lock is taken at once if it is free, else in a thread
    that waits for it (up to the busy timeout): another process or connection to the file
    holds it, the bus's for one.
    """
    inline = _inline_of(connection.connection)
    await_(inline.writers.acquire())
    try:
        raw = inline.sqlite()
        try:
            begin_at_once(raw)
        except sqlite3.Error as exc:
            if not is_busy(exc) or not await_(in_thread(begin_waiting, raw)):
                raise _as_sqlalchemy("BEGIN IMMEDIATE", exc) from exc
    except BaseException:
        # Cancelled while the thread waited: its BEGIN may have gone through since. SQLAlchemy
        # knows of no transaction here (its `begin` event failed), so it is undone here.
        if inline.dbapi_connection is not None and inline.dbapi_connection.in_transaction:
            inline.dbapi_connection.rollback()
        inline.writers.release()
        raise
    inline.writing = True


def begin_reading(connection: Connection) -> None:
    """Begin a transaction that only reads (a deferred BEGIN: no lock until it reads)."""
    raw = _inline_of(connection.connection).sqlite()
    try:
        raw.execute("BEGIN")
    except sqlite3.Error as exc:
        raise _as_sqlalchemy("BEGIN", exc) from exc


def _as_sqlalchemy(statement: str, error: sqlite3.Error) -> StatementError:
    # The BEGINs above go to `sqlite3` straight, from the engine's `begin` event (a statement
    # through the engine costs more than the rest of a short transaction; decision 0035); a
    # failure comes out as SQLAlchemy's, as a statement's would, for the store to translate.
    return DBAPIError.instance(statement, None, error, sqlite3.Error)


async def compact(connection: AsyncConnection) -> bool:
    """Give an erasure's freed bytes back (FTS5 merged, `VACUUM`, the WAL truncated), in a
    thread; whether the checkpoint went through. `connection` is in no transaction."""
    raw = _inline_of(await connection.get_raw_connection()).sqlite()
    return await in_thread(_compact, raw)


def _compact(raw: sqlite3.Connection) -> bool:
    # FTS5 keeps a deleted fact's terms in its segments until they are merged.
    raw.execute("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')")
    raw.execute("VACUUM")
    busy, *_ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return int(busy) == 0


def _inline_of(pooled: PoolProxiedConnection) -> InlineConnection:
    inline = pooled.driver_connection
    if not isinstance(inline, InlineConnection):
        raise TypeError(f"not an in-line SQLite connection: {inline!r}")
    return inline
