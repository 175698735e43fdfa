"""`SqliteStore`: the embedded `Store`, one SQLite file in the data directory, on aiosqlite.

One class per concern, each in its own module and all on one connection (`_sqlite_base.py`):
the conversation log (`_sqlite_log.py`), the cost ledger (`_sqlite_ledger.py`), schedules
(`_sqlite_schedules.py`), remembered facts (`_sqlite_facts.py`), checkpoints
(`_sqlite_checkpoints.py`), processed marks (`_sqlite_processed.py`), seen marks
(`_sqlite_seen.py`) and access records (`_sqlite_access.py`). This module opens the
file and migrates its schema.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Final

import aiosqlite

from core.clock import utc_now
from core.errors import StoreError
from core.store import _sqlite_access as _access
from core.store import _sqlite_checkpoints as _checkpoints
from core.store import _sqlite_facts as _facts
from core.store._connection import open_connection
from core.store._sqlite_access import SqliteAccess
from core.store._sqlite_checkpoints import SqliteCheckpoints
from core.store._sqlite_facts import SqliteFacts
from core.store._sqlite_ledger import MIGRATION as LEDGER_PEOPLE_MIGRATION
from core.store._sqlite_ledger import SqliteLedger
from core.store._sqlite_log import (
    FENCES_MIGRATION,
    REOPENED_MIGRATION,
    SUMMARIES_MIGRATION,
    TOUCH_MIGRATION,
    SqliteLog,
)
from core.store._sqlite_processed import SqliteProcessed
from core.store._sqlite_schedules import SqliteSchedules
from core.store._sqlite_seen import MIGRATION as SEEN_MIGRATION
from core.store._sqlite_seen import SqliteSeen

__all__ = ["SCHEMA_VERSION", "SqliteStore"]


# One entry per schema version: the statements that migrate version i to i + 1. Later issues
# append to this tuple; `PRAGMA user_version` records how far a database file has come.
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """,
        "CREATE INDEX sessions_by_key ON sessions (key, created_at)",
        "CREATE INDEX sessions_by_updated ON sessions (updated_at)",
        """
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
        "CREATE TABLE processed (key TEXT PRIMARY KEY, at TEXT NOT NULL)",
    ),
    (
        # The cost ledger: one row per provider call. A NULL cost means "no known price".
        """
        CREATE TABLE costs (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            run_id TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            cost_usd REAL,
            at TEXT NOT NULL
        )
        """,
        "CREATE INDEX costs_by_session ON costs (session_id)",
    ),
    (
        # Schedules and their runs. `body` (the model's JSON) is the record; the other columns
        # repeat parts of it for queries. Times are fixed-width UTC text, so they sort.
        """
        CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat TEXT NOT NULL,
            thread TEXT,
            status TEXT NOT NULL,
            next_run_at TEXT,
            created_at TEXT NOT NULL,
            body TEXT NOT NULL
        )
        """,
        "CREATE INDEX schedules_by_due ON schedules (status, next_run_at)",
        "CREATE INDEX schedules_by_owner ON schedules (owner)",
        """
        CREATE TABLE schedule_runs (
            id TEXT PRIMARY KEY,
            schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
            started_at TEXT NOT NULL,
            body TEXT NOT NULL
        )
        """,
        "CREATE INDEX schedule_runs_by_start ON schedule_runs (schedule_id, started_at)",
    ),
    # Remembered facts and their full-text index.
    _facts.MIGRATION,
    # Compaction summaries.
    SUMMARIES_MIGRATION,
    # Turn checkpoints, for recovery after a crash.
    _checkpoints.MIGRATION,
    # The highest fencing epoch seen per session key (`core/fencing.py`).
    FENCES_MIGRATION,
    # Sessions reopened as their key's current one (`switchboard chat --session`).
    REOPENED_MIGRATION,
    # The newest message seen per conversation, where catch-up after downtime starts.
    SEEN_MIGRATION,
    # The person and chat of each ledger entry, for the daily budgets and `cost --by`.
    LEDGER_PEOPLE_MIGRATION,
    # Pairing requests and approvals (`core/access.py`).
    _access.MIGRATION,
    # A stored message moves its session's `updated_at` (an append is one statement).
    TOUCH_MIGRATION,
)

SCHEMA_VERSION: Final = len(_MIGRATIONS)


class SqliteStore(
    SqliteLog,
    SqliteLedger,
    SqliteSchedules,
    SqliteFacts,
    SqliteCheckpoints,
    SqliteProcessed,
    SqliteSeen,
    SqliteAccess,
):
    """The `Store` on a SQLite file (or `":memory:"`), opened with `await SqliteStore.open(...)`.

    Every write commits before the awaited call returns.
    """

    @classmethod
    async def open(
        cls, path: Path | str, *, clock: Callable[[], datetime] = utc_now
    ) -> SqliteStore:
        """Open (creating it and its parent directories if needed) and migrate the database."""
        target = str(path)
        try:
            # Autocommit mode: transactions are begun and ended explicitly by `_write`.
            db = await open_connection(target)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the SQLite store at {target}: {exc}") from exc
        try:
            await db.execute("PRAGMA foreign_keys = ON")
            await _migrate(db, target)
        except BaseException as exc:
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot prepare the SQLite store at {target}: {exc}") from exc
            raise
        return cls(db, clock=clock)


async def _migrate(db: aiosqlite.Connection, target: str) -> None:
    """Bring the schema to `SCHEMA_VERSION`, one committed transaction per version."""
    rows = await db.execute_fetchall("PRAGMA user_version")
    version = int(next(iter(rows))[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the SQLite store at {target} has schema version {version}; this Switchboard"
            f" knows versions up to {SCHEMA_VERSION}"
        )
    for number, statements in enumerate(_MIGRATIONS[version:], start=version + 1):
        try:
            await db.execute("BEGIN IMMEDIATE")
            for statement in statements:
                await db.execute(statement)
            # PRAGMA takes no parameters; `number` is an int from our own table.
            await db.execute(f"PRAGMA user_version = {number:d}")
            await db.commit()
        except BaseException:
            await db.rollback()
            raise
