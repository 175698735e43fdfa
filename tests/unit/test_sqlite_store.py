"""What only `SqliteStore` promises: a file that outlives the process, and a versioned schema.

The behaviour every store shares is in `tests/contract/test_store_contract.py`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import pytest

from core.errors import StoreError
from core.messages import ImagePart, Message
from core.store.sqlite import SCHEMA_VERSION, SqliteStore

FROZEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def frozen_clock() -> datetime:
    return FROZEN


async def _pragma(path: Path, name: str) -> object:
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall(f"PRAGMA {name}"))
    return rows[0][0]


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    store = await SqliteStore.open(path)
    session = await store.current_session("telegram:42")
    image = ImagePart(media_type="image/png", data=b"\x89PNG\xff\x00")
    first = await store.append_message(session.id, Message.user("hi", images=[image]))
    second = await store.append_message(session.id, Message.assistant("hello"))
    await store.mark_processed("telegram:update:1")
    await store.close()

    reopened = await SqliteStore.open(path)
    try:
        assert (await reopened.current_session("telegram:42")).id == session.id
        assert await reopened.list_messages(session.id) == [first, second]
        assert await reopened.is_processed("telegram:update:1") is True
        assert (await reopened.append_message(session.id, Message.user("again"))).seq == 3
    finally:
        await reopened.close()


async def test_open_creates_parent_directories_and_sets_up_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "data" / "switchboard.db"

    store = await SqliteStore.open(path)
    await store.close()

    assert await asyncio.to_thread(path.is_file)
    assert await _pragma(path, "user_version") == SCHEMA_VERSION
    assert await _pragma(path, "journal_mode") == "wal"


async def test_reopening_keeps_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    await (await SqliteStore.open(path)).close()
    await (await SqliteStore.open(path)).close()

    assert SCHEMA_VERSION >= 1
    assert await _pragma(path, "user_version") == SCHEMA_VERSION


async def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    async with aiosqlite.connect(path) as db:
        await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        await db.commit()

    with pytest.raises(StoreError, match="schema version"):
        await SqliteStore.open(path)


async def test_memory_database_works() -> None:
    store = await SqliteStore.open(":memory:")
    try:
        session = await store.current_session("terminal")
        stored = await store.append_message(session.id, Message.user("hi"))
        assert await store.list_messages(session.id) == [stored]
    finally:
        await store.close()


async def test_unopenable_path_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteStore.open(tmp_path)


async def test_use_after_close_raises_store_error() -> None:
    store = await SqliteStore.open(":memory:")
    await store.close()
    await store.close()  # closing twice is harmless

    with pytest.raises(StoreError, match="closed"):
        await store.current_session("terminal")


async def test_new_session_is_current_even_within_the_same_instant() -> None:
    """With equal `created_at` the later-created session still wins (rowid breaks the tie)."""
    store = await SqliteStore.open(":memory:", clock=frozen_clock)
    try:
        old = await store.current_session("terminal")
        fresh = await store.create_session("terminal")

        assert fresh.created_at == old.created_at == FROZEN
        assert (await store.current_session("terminal")).id == fresh.id
    finally:
        await store.close()


async def test_naive_clock_is_refused() -> None:
    store = await SqliteStore.open(":memory:", clock=lambda: datetime(2025, 3, 1))  # noqa: DTZ001
    try:
        with pytest.raises(StoreError, match="naive"):
            await store.create_session("terminal")
        assert await store.list_sessions() == []
    finally:
        await store.close()


async def test_timestamps_come_back_in_utc() -> None:
    plus_two = datetime.fromisoformat("2025-03-01T14:00:00+02:00")
    store = await SqliteStore.open(":memory:", clock=lambda: plus_two)
    try:
        session = await store.create_session("terminal")
        found = await store.get_session(session.id)
        stored = await store.append_message(session.id, Message.user("hi"))
        [listed] = await store.list_messages(session.id)
    finally:
        await store.close()

    assert found is not None and found.created_at == FROZEN
    assert found.created_at.tzinfo == UTC
    assert stored.created_at == listed.created_at == FROZEN
    assert listed.created_at is not None and listed.created_at.tzinfo == UTC
