"""Reply records and their holds across a Redis restart (with persistence), against a
redis-server of the test's own that is stopped and started again.

The records are in the SQL database and the holds in Redis (`HeldReplyRecords`). A gateway
that cannot release a reply's hold while Redis restarts must release it once Redis is back (a
hold left behind blocks every delivery of the reply, and the gateway's queue behind it, for the
whole lease), and the record of a message the platform just showed is saved meanwhile, as it
does not depend on Redis (a record lost would make the next delivery send the message again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from core.backends.redis.client import connect_redis
from core.backends.redis.keys import RedisKeys
from core.backends.redis.replies_hold import RedisReplyHolds
from core.backends.sql.store import SqlReplyRecords
from core.store.replies import HeldReplyRecords, ReplyRecord, ShownMessage
from tests.redis_server import RedisServer

KEYS = RedisKeys("restart")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    started = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(started.start)
    try:
        yield started
    finally:
        await asyncio.to_thread(started.stop)


async def test_a_hold_is_released_once_redis_is_back_and_the_record_saved_meanwhile(
    server: RedisServer, tmp_path: Path
) -> None:
    sql = await SqlReplyRecords.open(f"sqlite+aiosqlite:///{tmp_path / 'records.db'}")
    client = connect_redis(server.url)
    records = HeldReplyRecords(sql, RedisReplyHolds(client, keys=KEYS, patience=20.0))
    raw = aioredis.Redis.from_url(server.url)
    record = ReplyRecord(
        key="telegram:1:2:3", messages=(ShownMessage(message_id="41", digest="d"),)
    )
    try:
        held = records.hold(record.key)
        await held.__aenter__()
        assert await raw.exists(KEYS.reply_hold(record.key)) == 1
        await raw.aclose()

        await asyncio.to_thread(server.stop)
        # While Redis is away: the record of what was shown, then the end of the hold.
        await asyncio.wait_for(records.save(record), 30)
        assert await records.get(record.key) == record
        releasing = asyncio.create_task(held.__aexit__(None, None, None))
        await asyncio.to_thread(server.start)
        await asyncio.wait_for(releasing, 30)

        raw = aioredis.Redis.from_url(server.url)
        assert await raw.exists(KEYS.reply_hold(record.key)) == 0
        assert await records.get(record.key) == record
    finally:
        await raw.aclose()
        await client.aclose()
        await sql.close()
