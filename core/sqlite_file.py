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
from pathlib import Path
from typing import Final

import aiosqlite

__all__ = ["MEMORY", "disk_full", "open_connection", "prepare_file"]

MEMORY: Final = ":memory:"


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
        await db.execute("PRAGMA busy_timeout = 5000")
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
