"""The SQL store's schema: Alembic brings every database to the newest revision on open.

On PostgreSQL processes starting together take turns (an advisory lock), so all of them end up
at head without error; a SQLite file is made private and upgraded on open.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from core.backends.sql.store import SqlStore, current_revision, head_revision, sqlite_url
from core.errors import StoreError, StoreUnavailable
from tests.postgres_server import PostgresServer
from tests.redis_server import free_port

# A process that opens the store at the URL given and closes it again.
_OPEN_AND_CLOSE = """
import asyncio, sys
from core.backends.sql.store import SqlStore

async def main() -> None:
    store = await SqlStore.open(sys.argv[1])
    await store.close()

asyncio.run(main())
"""


async def _revision(url: str) -> str | None:
    engine = create_async_engine(url)
    try:
        return await current_revision(engine)
    finally:
        await engine.dispose()


async def test_processes_opening_one_postgresql_database_at_once_all_end_at_head(
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.new_database()
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _OPEN_AND_CLOSE,
            url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(4)
    ]
    outputs = await asyncio.gather(*(process.communicate() for process in processes))

    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
    assert await _revision(url) == head_revision()


async def test_stores_opening_one_postgresql_database_at_once_can_all_write(
    postgres_url: str,
) -> None:
    stores = await asyncio.gather(*(SqlStore.open(postgres_url) for _ in range(4)))
    try:
        sessions = [await store.create_session(f"k{number}") for number, store in enumerate(stores)]
        assert {record.key for record in await stores[0].list_sessions()} == {
            record.key for record in sessions
        }
    finally:
        for store in stores:
            await store.close()
    assert await _revision(postgres_url) == head_revision()


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask of a login shell: files are made readable by everyone (0644)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
async def test_a_sqlite_file_is_made_private_and_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "data" / "switchboard.db"
    url = f"sqlite+aiosqlite:///{path}"

    store = await SqlStore.open(url)
    try:
        session = await store.create_session("terminal:default:it")  # the WAL is in use
        made = sorted(p.name for p in path.parent.iterdir())
        assert made == ["switchboard.db", "switchboard.db-shm", "switchboard.db-wal"]
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
        assert modes == dict.fromkeys(made, 0o600)
    finally:
        await store.close()

    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert await _revision(url) == head_revision()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # Opened again (already at head), the records are still there.
    again = await SqlStore.open(url)
    try:
        assert await again.get_session(session.id) == session
    finally:
        await again.close()


async def test_an_empty_sqlite_file_is_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    url = f"sqlite+aiosqlite:///{path}"
    assert await _revision(url) is None

    store = await SqlStore.open(url)
    await store.close()

    assert await _revision(url) == head_revision()


async def test_a_database_from_a_newer_switchboard_is_refused(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'newer.db'}"
    store = await SqlStore.open(url)
    await store.close()
    with sqlite3.connect(tmp_path / "newer.db") as db:
        db.execute("UPDATE alembic_version SET version_num = 'from_the_future'")

    with pytest.raises(StoreError, match="from_the_future"):
        await SqlStore.open(url)


async def test_a_sqlite_path_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="SQL store"):
        await SqlStore.open(sqlite_url(tmp_path))


@pytest.mark.parametrize("url", ["mysql+aiomysql://127.0.0.1/x", "not a url"])
async def test_a_url_of_another_database_is_refused(url: str) -> None:
    with pytest.raises(StoreError):
        await SqlStore.open(url)


async def test_on_sqlite_reads_go_on_while_another_connection_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    store = await SqlStore.open(f"sqlite+aiosqlite:///{path}")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        session = await store.create_session("terminal:default:it")
        writer.execute("BEGIN IMMEDIATE")  # another process's write transaction, left open

        # A read begins a deferred transaction: it reads beside the writer instead of
        # queueing for the write lock.
        assert await store.get_session(session.id) == session
        assert await store.list_messages(session.id) == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        await store.close()


async def test_a_postgresql_server_that_is_not_there_is_unavailable() -> None:
    port = free_port()

    with pytest.raises(StoreUnavailable) as raised:
        await SqlStore.open(f"postgresql://switchboard:hunter2@127.0.0.1:{port}/switchboard")

    assert "hunter2" not in str(raised.value)
