"""The `store` fixture of the store contract modules: one empty store of each implementation.

`open_store` opens the same store again (another process, or this one after a restart), with
the clock it is given. To add an implementation, add its name to the params of
`store_location` (and, if it needs a server, a branch there asking for that fixture) and one
branch in `open_store` that opens it with the given clock. Each concern's cases live in
`test_store_<concern>.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.store import Store
from tests.contract.store_support import OpenStore, TickingClock


@pytest.fixture(params=["sql-sqlite", "sql-postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Each implementation's name and where its empty store lives.

    A sync fixture on purpose: it asks for `postgres_url` (and so starts the test PostgreSQL)
    only for "sql-postgresql", and an async fixture cannot resolve async fixtures by name.
    """
    name = str(request.param)
    if name == "sql-postgresql":
        return name, request.getfixturevalue("postgres_url")
    if name == "sql-sqlite":
        return name, sqlite_url(tmp_path / "data" / "switchboard.db")
    raise AssertionError(f"no store implementation named {name!r}")


@pytest.fixture
async def open_store(store_location: tuple[str, str]) -> AsyncIterator[OpenStore]:
    """Opens the implementation's store with a given clock, as often as asked; each store it
    opened is closed after the test."""
    name, location = store_location
    opened: list[Store] = []

    async def open_store(clock: Callable[[], datetime]) -> Store:
        if not name.startswith("sql-"):
            raise AssertionError(f"no store implementation named {name!r}")
        store: Store = await SqlStore.open(location, clock=clock)
        opened.append(store)
        return store

    try:
        yield open_store
    finally:
        for store in opened:
            await store.close()


@pytest.fixture
async def store(open_store: OpenStore) -> Store:
    """An empty store of each implementation, closed after the test."""
    return await open_store(TickingClock())
