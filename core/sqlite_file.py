"""The SQLite data file: made private, and opened for one of Switchboard's connections.

The SQL store's engine (`core/backends/sql/store/_engine.py`), the work queues
(`core/backends/sql/bus.py`) and the heartbeats (`core/heartbeat.py`) each open their own
connections to the same data file; WAL lets them share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import aiosqlite

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MEMORY",
    "begin_at_once",
    "begin_waiting",
    "disk_full",
    "in_thread",
    "is_busy",
    "open_connection",
    "prepare_file",
]

_T = TypeVar("_T")

MEMORY: Final = ":memory:"
# How long a statement waits for another connection's lock before it fails.
BUSY_TIMEOUT_MS: Final = 5000


def disk_full(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a write because the disk (or the file's size limit) is full: an
    outage to wait out, not a fault of the write (reads still work meanwhile)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_FULL


async def open_connection(path: Path | str) -> aiosqlite.Connection:
    """A connection to `path` (its folder created) in autocommit mode, with WAL and a busy
    timeout; transactions are begun and ended explicitly by the caller. Raises `OSError` or
    `sqlite3.Error`, for the caller to say what could not be opened."""
    target = str(path)
    if target != MEMORY:
        await asyncio.to_thread(prepare_file, target)
    db = await aiosqlite.connect(target, isolation_level=None)
    try:
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except BaseException:
        await db.close()
        raise
    return db


def prepare_file(target: str) -> None:
    """Make the data file's folder and the file itself, private, unless they exist (blocking).

    The folder is 0700 when it is made here: it holds every conversation, and files created
    inside it follow the umask. An existing folder is left as it is (`doctor` audits it).
    """
    Path(target).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _create_private(target)


def _create_private(target: str) -> None:
    """Make the data file 0600 when it does not exist yet. SQLite then opens the existing
    file, and makes its `-wal` and `-shm` companions with the main file's mode, so none of
    them is readable by others whatever the umask."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


async def in_thread(call: Callable[..., _T], *args: Any) -> _T:
    """`call(*args)` in a thread; if the caller is cancelled meanwhile, the call is still
    waited for before the cancellation goes on, so the connection it uses is never used by
    the loop while the thread still is (a rollback beside a commit)."""
    running = asyncio.ensure_future(asyncio.to_thread(call, *args))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        await asyncio.wait([running])
        raise


def is_busy(error: BaseException | None) -> bool:
    """Whether `error` is SQLite's "the database is locked" (another connection's lock)."""
    # The primary code, whichever extended one (`SQLITE_BUSY_RECOVERY`...) came.
    return isinstance(error, sqlite3.OperationalError) and (
        error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
    )


def begin_at_once(raw: sqlite3.Connection) -> None:
    """`BEGIN IMMEDIATE` on `raw` without waiting for the lock; raises `sqlite3.Error` (busy
    when another connection holds the lock, `is_busy`)."""
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        raw.execute("BEGIN IMMEDIATE")
    finally:
        raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def begin_waiting(raw: sqlite3.Connection) -> bool:
    """`BEGIN IMMEDIATE` on `raw`, waiting for the lock (in a thread); whether it began."""
    raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    try:
        raw.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return False
    return True
