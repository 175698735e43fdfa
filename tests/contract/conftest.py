"""The `store` fixture of the store contract modules: one empty store of each implementation.

`open_store` opens the same store again (another process, or this one after a restart), with
the clock it is given. To add an implementation, add its name to the params of
`store_location` (and, if it needs a server, a branch there asking for that fixture) and one
branch in `open_store` that opens it with the given clock. Each concern's cases live in
`test_store_<concern>.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.store import Store
from tests.contract.store_support import OpenStore, TickingClock
from tests.postgres_server import PostgresServer
from tests.sql_at_head import copy_of, upgraded


@pytest.fixture(scope="session")
def postgres_at_head(postgres_server: PostgresServer) -> str:
    """The name of a database of the test server upgraded to the newest revision, the
    template of each test's (`CREATE DATABASE ... TEMPLATE`): an upgrade from empty is a
    second of round trips. (tests/integration/test_sql_store_schema.py upgrades empty ones.)"""
    url = asyncio.run(postgres_server.new_database())
    asyncio.run(upgraded(url))
    return url.rsplit("/", 1)[1]


@pytest.fixture
async def postgres_url_at_head(postgres_server: PostgresServer, postgres_at_head: str) -> str:
    """A database of its own for this test, a copy of `postgres_at_head`."""
    return await postgres_server.new_database(template=postgres_at_head)


@pytest.fixture(params=["sql-sqlite", "sql-postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Each implementation's name and where its empty store, at the newest revision, lives.

    A sync fixture on purpose: it asks for the PostgreSQL fixtures (and so starts the test
    PostgreSQL) only for "sql-postgresql", and an async fixture cannot resolve async fixtures
    by name.
    """
    name = str(request.param)
    if name == "sql-postgresql":
        return name, request.getfixturevalue("postgres_url_at_head")
    if name == "sql-sqlite":
        path = copy_of(request.getfixturevalue("sqlite_at_head"), tmp_path / "data")
        return name, sqlite_url(path)
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
