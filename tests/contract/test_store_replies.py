"""The `ReplyRecords` contract: in memory, in the SQL store (on SQLite and on PostgreSQL), and
in the SQL store with the holds in Redis (the distributed deployment), the same cases."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.backends.redis.client import connect_redis
from core.backends.redis.replies_hold import RedisReplyHolds
from core.backends.sql.store import SqlReplyRecords, sqlite_url
from core.store.replies import (
    HeldReplyRecords,
    MemoryReplyRecords,
    ReplyHolds,
    ReplyRecord,
    ReplyRecords,
    ShownMessage,
    digest,
)

PATIENCE = 5.0


@pytest.fixture(params=["memory", "sql-sqlite", "sql-postgresql", "sql-and-redis"])
async def records(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ReplyRecords]:
    """Empty records of each implementation, closed after the test."""
    if request.param == "memory":
        yield MemoryReplyRecords()
    elif request.param in ("sql-sqlite", "sql-postgresql"):
        # The session's server (a sync fixture: this async one cannot ask for async ones).
        url = (
            await request.getfixturevalue("postgres_server").new_database()
            if request.param == "sql-postgresql"
            else sqlite_url(tmp_path / "replies.sqlite")
        )
        sql = await SqlReplyRecords.open(url)
        try:
            yield sql
        finally:
            await sql.close()
    else:
        # The session's Redis server; every test uses fresh keys, so none is flushed.
        server = request.getfixturevalue("redis_server")
        sql = await SqlReplyRecords.open(sqlite_url(tmp_path / "replies.sqlite"))
        client = connect_redis(server.url)
        try:
            yield HeldReplyRecords(sql, RedisReplyHolds(client))
        finally:
            await client.aclose()
            await sql.close()


def _key() -> str:
    return f"telegram:bot:42:{uuid.uuid4().hex}"


async def test_a_saved_record_reads_back_and_an_unknown_one_is_none(records: ReplyRecords) -> None:
    key = _key()
    assert await records.get(key) is None
    record = ReplyRecord(
        key=key,
        seq=3,
        messages=(ShownMessage(message_id="7", digest=digest("a")),),
        finished=True,
    )
    async with records.hold(key):
        await records.save(record)
    assert await records.get(key) == record
    assert (await records.get(key) or record).message_ids == ["7"]


async def test_a_reply_has_one_holder_at_a_time(records: ReplyRecords) -> None:
    key = _key()
    inside = 0
    most = 0
    entered = asyncio.Event()

    async def hold(number: int) -> None:
        nonlocal inside, most
        async with records.hold(key):
            inside += 1
            most = max(most, inside)
            if number == 0:
                entered.set()
            # Let the others try while this one holds the reply.
            for _ in range(5):
                await asyncio.sleep(0)
            inside -= 1

    async with asyncio.timeout(PATIENCE):
        await asyncio.gather(*(hold(number) for number in range(4)))
    assert entered.is_set() and most == 1


async def test_different_replies_are_held_independently(records: ReplyRecords) -> None:
    first, second = _key(), _key()
    async with asyncio.timeout(PATIENCE), records.hold(first), records.hold(second):
        await records.save(ReplyRecord(key=second, seq=1))
    assert (await records.get(second) or ReplyRecord(key=second)).seq == 1


async def test_two_redis_clients_never_hold_one_reply_at_once(redis_server: object) -> None:
    url = getattr(redis_server, "url")  # noqa: B009 - the fixture's type lives in tests/
    clients = [connect_redis(url), connect_redis(url)]
    one, two = (RedisReplyHolds(client) for client in clients)
    key = _key()
    held = asyncio.Event()
    release = asyncio.Event()
    try:

        async def first() -> None:
            async with one.hold(key):
                held.set()
                await release.wait()

        task = asyncio.create_task(first())
        await held.wait()
        second = asyncio.create_task(_enter(two, key))
        # The second client cannot get in while the first holds the reply, however long…
        for _ in range(20):
            await asyncio.sleep(0)
        assert not second.done()
        release.set()
        # …and gets it once the first lets go.
        async with asyncio.timeout(PATIENCE):
            await task
            await second
    finally:
        for client in clients:
            await client.aclose()


async def _enter(records: ReplyHolds, key: str) -> None:
    async with records.hold(key):
        pass
