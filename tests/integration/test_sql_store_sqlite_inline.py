"""The SQL store's SQLite connections run their statements on the event loop's thread
(`core/backends/sql/store/_inline.py`, decision 0028), and what could wait long does not hold
the loop: a write transaction that finds the write lock taken waits for it in a thread, while
the loop goes on; a commit that wrote, and an erasure's `VACUUM`, run in a thread too.

A real SQLite file; the lock is held by a plain `sqlite3` connection of the test, as another
process or the bus's connection to the same file would hold it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from core.backends.sql.store import SqlStore, sqlite_url
from core.backends.sql.store._engine import open_engine


async def test_statements_run_on_the_loops_thread(tmp_path: Path) -> None:
    engine = await open_engine(sqlite_url(tmp_path / "records.db"))

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Called, when a statement uses it, on the thread that runs the statement.
        dbapi_connection.create_function("thread_id", 0, threading.get_ident)

    event.listen(engine.sync_engine, "connect", on_connect)
    try:
        async with engine.connect() as connection:
            ran_on = (await connection.execute(text("SELECT thread_id()"))).scalar_one()
    finally:
        await engine.dispose()
    assert ran_on == threading.get_ident()


async def test_a_write_waits_for_the_lock_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "records.db"
    store = await SqlStore.open(sqlite_url(path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock, held by another connection
        writing = asyncio.create_task(store.mark_processed("telegram:1:1"))
        # The task runs until it waits; with the loop held, it would end only after the busy
        # timeout, failing ("database is locked").
        await asyncio.sleep(0)
        assert not writing.done()
        other.execute("COMMIT")
        assert await writing is True
        assert await store.is_processed("telegram:1:1")
    finally:
        other.close()
        await store.close()


async def test_writers_waiting_for_the_lock_take_turns_on_the_loop(tmp_path: Path) -> None:
    # More writers than the default executor has threads: were each to wait for the lock in
    # a thread, the first one's commit (in a thread too) would queue behind the others'
    # waits, and they would time out ("database is locked").
    writers = (os.cpu_count() or 1) + 6
    path = tmp_path / "records.db"
    store = await SqlStore.open(sqlite_url(path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writing = [
            asyncio.create_task(store.mark_processed(f"telegram:1:{n}")) for n in range(writers)
        ]
        await asyncio.sleep(0)  # each runs until it waits: for the lock, or its turn
        other.execute("COMMIT")
        assert await asyncio.gather(*writing) == [True] * writers
    finally:
        other.close()
        await store.close()


async def test_a_read_goes_on_while_another_connection_writes(tmp_path: Path) -> None:
    path = tmp_path / "records.db"
    store = await SqlStore.open(sqlite_url(path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        assert await store.mark_processed("telegram:1:1")
        other.execute("BEGIN IMMEDIATE")
        other.execute("DELETE FROM processed")  # not committed: the store reads the snapshot
        assert await store.is_processed("telegram:1:1")
        other.execute("ROLLBACK")
    finally:
        other.close()
        await store.close()


async def test_a_write_cancelled_while_it_waits_for_the_lock_leaves_no_transaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "records.db"
    store = await SqlStore.open(sqlite_url(path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.create_task(store.mark_processed("telegram:1:1"))
        await asyncio.sleep(0)  # the write now waits for the lock in a thread
        writing.cancel()
        await asyncio.sleep(0)  # the cancellation waits for that thread
        other.execute("COMMIT")  # so the thread takes the lock, and gives it back
        with pytest.raises(asyncio.CancelledError):
            await writing
        # Nothing of the cancelled write holds the lock or a transaction on a connection.
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        assert await store.mark_processed("telegram:1:2") is True
        assert not await store.is_processed("telegram:1:1")
    finally:
        other.close()
        await store.close()
