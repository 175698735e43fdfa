"""Opening the SQL store's async engine: SQLite (SQLAlchemy's aiosqlite dialect on
connections that call `sqlite3` in line, `_inline.py`) or PostgreSQL (asyncpg).

On SQLite every connection gets WAL, a busy timeout and foreign keys on, and the data file is
created 0600 in a 0700 folder (`core/sqlite_file.py`). SQLite write transactions begin with
`BEGIN IMMEDIATE`, so a transaction that reads and then writes holds the file's write lock
from its start and cannot deadlock with another one doing the same; a connection with the
`READS` execution option begins a plain (deferred) transaction, which reads a snapshot
beside the writer (WAL).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from core.backends.sql.store._inline import begin_immediate, begin_reading, connect_inline
from core.errors import StoreError
from core.sqlite_file import BUSY_TIMEOUT_MS, MEMORY, prepare_file

__all__ = ["READS", "is_outage", "open_engine", "parse_url", "sqlite_file", "sqlite_url"]

# The execution option of a connection whose transactions only read.
READS: Final = "switchboard_reads"

# The async driver of each database; `postgres://` is the spelling some hosts hand out.
_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}

# The SQLSTATEs of a server that is away for now, not of a statement that is wrong: the
# connection failed or was cut (class 08), the server is shutting down, crashed or still
# starting (57P01, 57P02, 57P03: a restart), or has no connection slot left (53300).
_AWAY: Final = ("08", "57P01", "57P02", "57P03", "53300")


def is_outage(exc: DBAPIError) -> bool:
    """Whether the driver's `exc` says the database is away for now (the same call may work
    once it is back) rather than that the call is wrong."""
    if exc.connection_invalidated:
        return True
    state = getattr(exc.orig, "sqlstate", None)
    return isinstance(state, str) and state.startswith(_AWAY)


def parse_url(url: str | URL) -> URL:
    """The SQLAlchemy URL of `url`, its driver the async one of its database; `StoreError`
    for a URL of another database or none at all."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"not a database URL: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend not in _DRIVERS:
        raise StoreError(f"the SQL store runs on SQLite or PostgreSQL, not {backend!r}")
    return parsed.set(drivername=_DRIVERS[backend])


def sqlite_url(path: Path | str) -> str:
    """The URL of the SQLite file at `path`."""
    return f"sqlite+aiosqlite:///{path}"


def sqlite_file(url: str | URL) -> Path | None:
    """The file of a SQLite `url` (None: PostgreSQL, or SQLite in memory)."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return None if parsed.database == MEMORY else Path(parsed.database)


async def open_engine(url: str | URL) -> AsyncEngine:
    """An engine for `url` (see `parse_url`); for a SQLite file, its folder and file made
    private first."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "postgresql":
        # A connection the server dropped (a restart) is noticed and replaced before use.
        return create_async_engine(parsed, pool_pre_ping=True)
    path = parsed.database or MEMORY
    if path != MEMORY:
        try:
            await asyncio.to_thread(prepare_file, path)
        except OSError as exc:
            raise StoreError(f"cannot open the SQLite store at {path}: {exc}") from exc
    writers = asyncio.Lock()  # the engine's write transactions, one at a time
    # No rollback by the pool when a connection comes back: every transaction of the store
    # ends in its own commit or rollback (a `Connection` closed in one rolls it back), and
    # the pool's second one cost a third of a short read's time (decision 0035).
    engine = create_async_engine(
        parsed,
        async_creator=lambda: connect_inline(path, writers),
        pool_reset_on_return=None,
    )
    event.listen(engine.sync_engine, "connect", _on_sqlite_connect)
    event.listen(engine.sync_engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver's own transaction handling is off (`connect_inline`): `_on_sqlite_begin`
    # says how to begin.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    options = connection.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":
        return  # each statement its own transaction (`VACUUM` runs in none)
    if options.get(READS, False):
        begin_reading(connection)
    else:
        begin_immediate(connection)
