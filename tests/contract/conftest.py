"""The `store` fixture of the store contract modules: one empty store of each implementation.

To add an implementation, add its name to the params of `store_location` (and, if it needs a
server, a branch there asking for that fixture) and one branch in `store` that opens it with
the given clock. Each concern's cases live in `test_store_<concern>.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store import SqliteStore, Store
from core.store.sql import SqlStore
from tests.contract.store_support import TickingClock


@pytest.fixture(params=["sqlite", "sql-sqlite", "sql-postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Each implementation's name and where its empty store lives.

    A sync fixture on purpose: it asks for `postgres_url` (and so starts the test PostgreSQL)
    only for "sql-postgresql", and an async fixture cannot resolve async fixtures by name.
    """
    name = str(request.param)
    if name == "sql-postgresql":
        return name, request.getfixturevalue("postgres_url")
    if name == "sql-sqlite":
        return name, f"sqlite+aiosqlite:///{tmp_path / 'data' / 'switchboard.db'}"
    return name, str(tmp_path / "data" / "switchboard.db")


@pytest.fixture
async def store(store_location: tuple[str, str]) -> AsyncIterator[Store]:
    """An empty store of each implementation, closed after the test."""
    clock = TickingClock()
    opened: Store
    name, location = store_location
    if name == "sqlite":
        opened = await SqliteStore.open(location, clock=clock)
    elif name.startswith("sql-"):
        opened = await SqlStore.open(location, clock=clock)
    else:
        raise AssertionError(f"no store implementation named {name!r}")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def retried_store(store: Store, store_location: tuple[str, str]) -> Store:
    """`store`, for the cases of writes tried again by their ids (a message's, a cost
    entry's), which the old SQLite store does not recognise."""
    if store_location[0] == "sqlite":
        pytest.skip("the old SQLite store keeps no message or cost entry ids")
    return store
