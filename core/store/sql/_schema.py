"""Bringing a database's schema to the newest Alembic revision (`core/store/migrations/`).

On PostgreSQL the upgrade runs under a session advisory lock, so processes starting together
take turns: the first upgrades, the others find the schema at head. SQLite serialises the
upgrade by its `BEGIN IMMEDIATE` transaction; a file of the old embedded store is converted in
that same transaction (`_legacy.py`). Within one process upgrades take turns as well:
Alembic's `context` and `op` are process-wide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final
from weakref import WeakKeyDictionary

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from core.store.sql._legacy import copy_legacy, set_aside_legacy

__all__ = ["MIGRATIONS", "current_revision", "head_revision", "upgrade"]

MIGRATIONS: Final = Path(__file__).resolve().parent.parent / "migrations"

# Any fixed 64-bit number, the same in every process: the key of the advisory lock.
_LOCK_KEY: Final = 0x5357_4254_4442  # "SWBTDB"

# One lock per event loop (an asyncio lock belongs to the loop it is used on).
_TURNS: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = WeakKeyDictionary()


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    """The newest revision this Switchboard knows."""
    return ScriptDirectory.from_config(_config()).get_current_head()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None: an empty database)."""
    async with engine.connect() as connection:
        return await connection.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )


async def upgrade(engine: AsyncEngine) -> None:
    """Upgrade the database to the newest revision (nothing to do when it is there)."""
    turn = _TURNS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with turn, engine.connect() as connection:
        await connection.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    locked = connection.dialect.name == "postgresql"
    if locked:
        # A session lock, taken outside the migration's transaction and held until unlocked.
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
        connection.commit()
    try:
        # A file of the old embedded store: its tables step aside in this transaction, and
        # their rows move into the new schema before it commits (`_legacy.py`).
        legacy = set_aside_legacy(connection)
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        copy_legacy(connection, legacy)
        connection.commit()
    finally:
        if locked:
            connection.rollback()
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _LOCK_KEY})
            connection.commit()
