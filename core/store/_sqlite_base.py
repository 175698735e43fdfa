"""What every concern of `SqliteStore` shares: one connection, its lock, transactions, the clock.

One connection serves every coroutine of the process. aiosqlite already runs statements one at
a time on its own thread; an `asyncio.Lock` on top keeps the statements of one transaction
together, so concurrent `append_message` calls cannot interleave their `max(seq) + 1`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import aiosqlite
from pydantic import ValidationError

from core.errors import StoreError, StoreUnavailable
from core.store._connection import disk_full

__all__ = ["SqliteBase"]


class SqliteBase:
    """The connection and the transaction helpers the per-concern classes are built on."""

    def __init__(self, db: aiosqlite.Connection, *, clock: Callable[[], datetime]) -> None:
        """Wrap an open, migrated connection; use `SqliteStore.open` instead."""
        self._db = db
        self._clock = clock
        self._lock = asyncio.Lock()
        self._closed = False

    async def close(self) -> None:
        """Close the connection; later calls raise `StoreError`."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            try:
                await self._db.close()
            except sqlite3.Error as exc:
                raise StoreError(f"closing the SQLite store failed: {exc}") from exc

    @asynccontextmanager
    async def _read(self, action: str) -> AsyncIterator[None]:
        # Reads take the lock too: on a shared connection they would otherwise see the
        # uncommitted half of a write transaction that may still roll back.
        async with self._lock, _translated(action):
            self._ensure_open()
            yield

    @asynccontextmanager
    async def _statement(self, action: str) -> AsyncIterator[None]:
        """A write of one statement: atomic on its own (the connection autocommits, and a
        statement that writes takes the write lock before it reads), and one trip to
        aiosqlite's thread instead of the three of a transaction around it."""
        async with self._lock, _translated(action):
            self._ensure_open()
            yield

    @asynccontextmanager
    async def _write(self, action: str) -> AsyncIterator[None]:
        """One write transaction, committed on success and rolled back on any exception."""
        async with self._lock, _translated(action):
            self._ensure_open()
            try:
                # IMMEDIATE takes the file's write lock now, so another process cannot slip a
                # write between our read of max(seq) and our insert. BEGIN sits inside the
                # `try`: if we are cancelled while it is queued, it still runs, and the
                # rollback queued behind it must undo it.
                await self._db.execute("BEGIN IMMEDIATE")
                yield
                await self._db.commit()
            except BaseException:
                # A no-op when no transaction is open (BEGIN or COMMIT itself failed).
                await self._db.rollback()
                raise

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError("the SQLite store is closed")

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)


@asynccontextmanager
async def _translated(action: str) -> AsyncIterator[None]:
    """Turn driver failures into `StoreError`s that say what the store was doing."""
    try:
        yield
    except sqlite3.Error as exc:
        if disk_full(exc):
            raise StoreUnavailable(
                f"SQLite store could not {action}: the disk is full ({exc})"
            ) from exc
        raise StoreError(f"SQLite store could not {action}: {exc}") from exc
    except ValidationError as exc:
        raise StoreError(f"SQLite store could not {action}: stored data is invalid: {exc}") from exc
