"""W3's last part: Redis's memory while one worker answers 10,000 messages.

One `switchboard worker` on a fresh redis-server, the records in PostgreSQL (`DATABASE_URL`,
a database of its own on the bench's server), 1,000 conversations of 10 messages, as many at a
time as in W3's phases (32). redis-server's `INFO memory` `used_memory` (everything it has
allocated: data, buffers, its own structures) and its key count are read before the first
message and after every tenth of them. With the records in the database, Redis holds queues,
leases and counters only, so what it uses should not grow with the history; the database's
size is printed beside it, since that is where the history went. At the end, the keys left are
listed by shape (their ids as `#`), with how many of each have no expiry.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.markup import escape

from bench import database
from bench.common import BenchError, provider_env
from bench.report import console, table

MESSAGES_PER_CONVERSATION = 10
_ID = re.compile(r"[0-9a-f]{8,}(-[0-9a-f]{4,})*|\d+")


def redis_memory(url: str, server: Any, messages: int, at_once: int) -> dict[str, Any]:
    """Redis's memory as `messages` messages are answered (the fake LLM at `url`, the records
    on the PostgreSQL `server`)."""
    from bench.distributed import _worker, bench_profile
    from tests.redis_server import RedisServer

    db_url = asyncio.run(server.new_database())
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="switchboard-mem-")))
        try:
            redis = RedisServer(work / "redis")
            redis.start()
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        stack.callback(redis.stop)
        env = provider_env("openai", url, work / "data")
        env["REDIS_URL"] = redis.url
        env["DATABASE_URL"] = database.plain_url(db_url)
        env["SWITCHBOARD_PROFILES_DIR"] = str(bench_profile(work / "profiles"))
        counts = work / "worker.counts.json"
        stack.enter_context(_worker(env, work / "worker.log", counts, at_once))
        figures = asyncio.run(_drive(redis.url, db_url, messages, at_once))
    _print(figures)
    return figures


async def _drive(redis_url: str, db_url: str, messages: int, at_once: int) -> dict[str, Any]:
    import redis.asyncio as aioredis

    from bench.driver import ChatDriver
    from core.backends.redis.bus import RedisBus
    from core.backends.redis.mailboxes import RedisMailboxes

    bus = await RedisBus.connect(redis_url)
    mailboxes = RedisMailboxes.from_url(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    conversations = max(1, messages // MESSAGES_PER_CONVERSATION)
    step = max(1, conversations // 10)
    samples: list[dict[str, Any]] = []

    async def sample() -> None:
        memory = await client.info("memory")
        samples.append(
            {
                "messages": driver.answered,
                "used_memory": int(memory["used_memory"]),
                "used_memory_dataset": int(memory["used_memory_dataset"]),
                "keys": int(await client.dbsize()),
                "database_bytes": await _database_bytes(db_url),
            }
        )

    try:
        async with ChatDriver(bus, mailboxes) as driver:
            # One message first: the worker started, connected and its schema made.
            await driver.conversations(1, 1, first=conversations)
            driver.answered = 0
            await sample()
            for first in range(0, conversations, step):
                count = min(step, conversations - first)
                await driver.conversations(
                    count, MESSAGES_PER_CONVERSATION, at_once=at_once, first=first
                )
                # The worker's last writes of a turn land after its answer went out.
                await asyncio.sleep(0.3)
                await sample()
        shapes = await _key_shapes(client)
    finally:
        await client.aclose()
        await bus.close()
        await mailboxes.aclose()
    start, warm, end = samples[0], samples[1], samples[-1]
    later = end["messages"] - warm["messages"]
    return {
        "messages": end["messages"],
        "samples": samples,
        "used_memory_start": start["used_memory"],
        "used_memory_end": end["used_memory"],
        "growth_bytes": end["used_memory"] - start["used_memory"],
        # After the first tenth: Redis's own buffers and the worker's connections settled.
        "growth_after_first_tenth_bytes": end["used_memory"] - warm["used_memory"],
        "growth_bytes_per_1000_messages": (
            (end["used_memory"] - warm["used_memory"]) * 1000 / later if later else 0.0
        ),
        "keys_end": end["keys"],
        "database_bytes_end": end["database_bytes"],
        "key_shapes": shapes,
    }


async def _key_shapes(client: Any) -> dict[str, dict[str, int]]:
    """The keys by shape (each run of digits or of 8 or more hex digits as `#`): how many, and
    how many of them never expire."""
    shapes: dict[str, dict[str, int]] = {}
    keys = [key async for key in client.scan_iter(count=1000)]
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.ttl(key)
        ttls = await pipe.execute()
    for key, ttl in zip(keys, ttls, strict=True):
        shape = _ID.sub("#", key.decode(errors="replace"))
        found = shapes.setdefault(shape, {"keys": 0, "without_expiry": 0})
        found["keys"] += 1
        found["without_expiry"] += ttl == -1
    return dict(sorted(shapes.items(), key=lambda kv: -kv[1]["keys"]))


async def _database_bytes(db_url: str) -> int:
    import asyncpg

    connection = await asyncpg.connect(database.plain_url(db_url))
    try:
        size: int = await connection.fetchval("SELECT pg_database_size(current_database())")
    finally:
        await connection.close()
    return size


def _print(figures: dict[str, Any]) -> None:
    samples = figures["samples"]
    rows: list[list[Any]] = [
        [
            f"{s['messages']:,}",
            f"{s['used_memory'] / 1e6:.2f}",
            f"{s['used_memory_dataset'] / 1e6:.2f}",
            f"{s['keys']:,}",
            f"{s['database_bytes'] / 1e6:.1f}",
        ]
        for s in samples
    ]
    table(
        f"W3: Redis memory as one worker answers {figures['messages']:,} messages"
        " (records in PostgreSQL)",
        ["messages", "Redis used_memory MB", "of it data MB", "Redis keys", "PostgreSQL MB"],
        rows,
    )
    console.print(
        f"  Redis used_memory: {figures['used_memory_start'] / 1e6:.2f} MB before the first"
        f" message, {figures['used_memory_end'] / 1e6:.2f} MB after the last; after the first"
        f" tenth {figures['growth_bytes_per_1000_messages'] / 1e3:,.1f} kB more per 1,000"
        " messages"
    )
    table(
        "W3: the keys left in Redis by shape",
        ["key (ids as #)", "keys", "without expiry"],
        [
            [escape(shape), n["keys"], n["without_expiry"]]
            for shape, n in figures["key_shapes"].items()
        ],
    )
