"""Bringing a database's schema to the newest Alembic revision (`core/store/migrations/`).

On PostgreSQL the upgrade runs under a session advisory lock, so processes starting together
take turns: the first upgrades, the others find the schema at head. SQLite serialises the
upgrade by its `BEGIN IMMEDIATE` transaction; a file of the old embedded store is converted in
that same transaction (`_legacy.py`). Within one process upgrades take turns as well:
Alembic's `context` and `op` are process-wide.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, NamedTuple
from weakref import WeakKeyDictionary

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from core.backends.sql.store._engine import open_engine
from core.backends.sql.store._legacy import copy_legacy, is_legacy, set_aside_legacy
from core.errors import StoreError, StoreUnavailable

__all__ = [
    "MIGRATIONS",
    "Revision",
    "current_revision",
    "database_revision",
    "head_revision",
    "upgrade",
    "upgrade_database",
]

MIGRATIONS: Final = Path(__file__).resolve().parents[3] / "store" / "migrations"

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


class Revision(NamedTuple):
    """Where a database's schema is: its revision (None: none yet), and whether it is a file
    of the old embedded store that an upgrade converts."""

    current: str | None
    old_store: bool = False


async def _revision(engine: AsyncEngine) -> Revision:
    async with engine.connect() as connection:
        return await connection.run_sync(
            lambda sync: Revision(
                MigrationContext.configure(sync).get_current_revision(), is_legacy(sync)
            )
        )


@asynccontextmanager
async def engine_of(url: str | URL) -> AsyncIterator[AsyncEngine]:
    """An engine on `url`, disposed after; its failures a `StoreError` (`StoreUnavailable`
    for a server that is not there), the password hidden."""
    engine = await open_engine(url)
    where = engine.url.render_as_string(hide_password=True)
    try:
        yield engine
    except OSError as exc:
        # The server is not there (asyncpg's refused or failed connection).
        raise StoreUnavailable(f"cannot reach the SQL store at {where}: {exc}") from exc
    except (SQLAlchemyError, CommandError) as exc:
        # CommandError: a revision this Switchboard does not know (a newer one's database).
        raise StoreError(f"cannot prepare the SQL store at {where}: {exc}") from exc
    finally:
        await engine.dispose()


async def database_revision(url: str | URL) -> Revision:
    """The revision of the database at `url`, read without changing it."""
    async with engine_of(url) as engine:
        return await _revision(engine)


async def upgrade_database(url: str | URL) -> tuple[Revision, Revision]:
    """Upgrade the database at `url` to the newest revision; where it was and where it is."""
    async with engine_of(url) as engine:
        before = await _revision(engine)
        await upgrade(engine)
        return before, await _revision(engine)


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
