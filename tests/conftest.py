"""Fixtures and settings shared by every test directory."""

import asyncio
import logging
import os

# python-telegram-bot 22 warns (an error under filterwarnings=error) whenever a RetryAfter
# is built unless time periods are timedeltas; channels/telegram/spec.py sets the same for
# the product.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from core.backends.sql.store import SqlStore, sqlite_url
from core.logcontext import no_log_context
from tests.fakes.fixtures import (
    fake_anthropic,
    fake_discord,
    fake_embeddings,
    fake_openai,
    fake_search,
    fake_slack,
    fake_telegram,
)
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisClusterServers, RedisSentinelServer, RedisServer
from tests.sql_at_head import copy_of, upgraded
from tests.tracing import stop_recording

__all__ = [
    "fake_anthropic",
    "fake_discord",
    "fake_embeddings",
    "fake_openai",
    "fake_search",
    "fake_slack",
    "fake_telegram",
    "postgres_server",
    "postgres_url",
    "redis_cluster",
    "redis_sentinel",
    "redis_server",
    "redis_url",
    "session_id",
    "sqlite_at_head",
    "store",
]


@pytest.fixture(autouse=True)
def _no_spans_recorded_after() -> Iterator[None]:
    """A test that recorded spans (tests/tracing.py) leaves the next ones untraced."""
    yield
    stop_recording()


@pytest.fixture(autouse=True)
def _no_log_context_left() -> Iterator[None]:
    """A command run in-process binds its role for the rest of the context; the next test
    must not log under it."""
    with no_log_context():
        yield


@pytest.fixture(autouse=True)
def _log_levels_restored() -> Iterator[None]:
    """A command run in-process (`configure_logging`) sets the levels of our loggers, e.g.
    `core` to WARNING; a later test in the same process, such as one reading INFO lines with
    `caplog`, must see every logger's level as it was."""
    loggers = logging.Logger.manager.loggerDict
    levels = {name: lg.level for name, lg in loggers.items() if isinstance(lg, logging.Logger)}
    root = logging.getLogger().level
    yield
    logging.getLogger().setLevel(root)
    for name, lg in list(loggers.items()):
        # Only where it changed: each setLevel clears every logger's cache.
        if isinstance(lg, logging.Logger) and lg.level != levels.get(name, logging.NOTSET):
            lg.setLevel(levels.get(name, logging.NOTSET))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole run, on a free port; never the machine's own."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A 3-node Redis Cluster for the whole run (started only by the tests that ask)."""
    cluster = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def redis_sentinel(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisSentinelServer]:
    """A Sentinel monitoring the run's redis-server as the master of `switchboard`."""
    sentinel = RedisSentinelServer(tmp_path_factory.mktemp("redis-sentinel"), redis_server)
    sentinel.start()
    yield sentinel
    sentinel.stop()


@pytest.fixture
async def redis_url(redis_server: RedisServer) -> AsyncIterator[str]:
    """The test server's URL, emptied before the test."""
    client = aioredis.Redis.from_url(redis_server.url)
    await client.flushall()
    await client.aclose()
    yield redis_server.url


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run, on a free port; never the machine's own."""
    server = PostgresServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database of the test server, for this test alone."""
    return await postgres_server.new_database()


@pytest.fixture(scope="session")
def sqlite_at_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store file upgraded to the newest revision once for the run; tests get
    copies (tests/sql_at_head.py)."""
    path = tmp_path_factory.mktemp("sqlite-at-head") / "switchboard.db"
    asyncio.run(upgraded(sqlite_url(path)))
    return path


@pytest.fixture
async def store(tmp_path: Path, sqlite_at_head: Path) -> AsyncIterator[SqlStore]:
    """An empty SQLite store at the newest revision in the test's own folder (a copy of
    `sqlite_at_head`), closed afterwards."""
    opened = await SqlStore.open(sqlite_url(copy_of(sqlite_at_head, tmp_path)))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def session_id(store: SqlStore) -> str:
    """A terminal conversation's session in `store`."""
    return (await store.current_session("terminal:default:it")).id
