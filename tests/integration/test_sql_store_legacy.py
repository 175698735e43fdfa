"""A data file written by the old embedded store (`SqliteStore`, schema version 12) opens
under `SqlStore` and is converted with nothing lost.

The file and what the old store read from it are `tests/fixtures/sqlite_store_v12.*`, made
by `tests/fixtures/make_sqlite_store_file.py`.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from core.store.sql import SqlReplyRecords, SqlStore, head_revision
from tests.fixtures.make_sqlite_store_file import DB, EXPECTED, read_back


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "switchboard.db"
    shutil.copyfile(DB, target)
    return target


async def test_an_old_stores_file_reads_back_every_record_under_the_sql_store(
    tmp_path: Path,
) -> None:
    path = _copy(tmp_path)
    url = f"sqlite+aiosqlite:///{path}"
    store = await SqlStore.open(url)
    replies = await SqlReplyRecords.open(url)
    try:
        got = json.loads(json.dumps(await read_back(store, replies)))
    finally:
        await replies.close()
        await store.close()

    assert got == json.loads(EXPECTED.read_text(encoding="utf-8"))


async def test_the_converted_file_is_at_the_newest_revision_and_keeps_its_queues(
    tmp_path: Path,
) -> None:
    path = _copy(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE bus_entries (id TEXT PRIMARY KEY)")
        db.execute("INSERT INTO bus_entries VALUES ('queued')")
    db.close()
    store = await SqlStore.open(f"sqlite+aiosqlite:///{path}")
    await store.close()
    # Opened again: already converted, nothing to do.
    store = await SqlStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        assert [s.id for s in await store.list_sessions()] != []
    finally:
        await store.close()

    db = sqlite3.connect(path)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
        queued = db.execute("SELECT id FROM bus_entries").fetchall()
    finally:
        db.close()
    assert revision == head_revision()
    assert not [name for name in tables if name.startswith("legacy_")]
    assert queued == [("queued",)]
