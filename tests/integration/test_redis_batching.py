"""`BatchingRedis` and `QuickConnection` (core/redis_client.py) against a real redis-server.

Commands issued in one turn of the event loop leave as one pipeline, counted here by wrapping
the connection's write; each caller still gets its own reply or its own error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ResponseError

from core.redis_client import BatchingRedis, QuickConnection, redis_client


@pytest.fixture
async def batched(redis_url: str) -> AsyncIterator[BatchingRedis]:
    client = redis_client(redis_url, batching=True)
    assert isinstance(client, BatchingRedis)
    yield client
    await client.aclose()


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    writes: list[int] = []
    send = QuickConnection.send_packed_command

    async def counted(self: QuickConnection, command: Any, check_health: bool = True) -> None:
        writes.append(1)
        await send(self, command, check_health)

    monkeypatch.setattr(QuickConnection, "send_packed_command", counted)
    return writes


async def test_commands_issued_together_share_one_round_trip(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()  # connected before counting
    writes = _count_writes(monkeypatch)

    await asyncio.gather(*(batched.set(f"k{i}", i) for i in range(20)))
    values = await asyncio.gather(*(batched.get(f"k{i}") for i in range(20)))

    assert values == [str(i).encode() for i in range(20)]
    assert len(writes) == 2


async def test_each_caller_gets_its_own_error(batched: BatchingRedis) -> None:
    await batched.set("text", "not a number")

    good, bad = await asyncio.gather(
        batched.incr("counter"), batched.incr("text"), return_exceptions=True
    )

    assert good == 1
    assert isinstance(bad, ResponseError)
    assert await batched.get("counter") == b"1"


async def test_a_command_whose_caller_stopped_waiting_is_not_sent(batched: BatchingRedis) -> None:
    async def set_later() -> None:
        await batched.set("never", "1")

    task = asyncio.create_task(set_later())
    await asyncio.sleep(0)  # queued for this turn's batch, not sent yet
    task.cancel()
    kept = await batched.set("kept", "1")

    assert kept is True
    assert await batched.exists("never") == 0
    assert task.cancelled()


async def test_scripts_and_explicit_pipelines_work_as_on_any_client(
    batched: BatchingRedis,
) -> None:
    script = batched.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    async with batched.pipeline(transaction=True) as pipe:
        pipe.set("n", 10)
        pipe.incr("n")
        done = await pipe.execute()

    results = await asyncio.gather(script(keys=["n"], args=[5]), script(keys=["n"], args=[1]))

    assert done == [True, 11]
    assert list(results) == [16, 17]


async def test_explicit_pipelines_of_several_callers_share_one_round_trip(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()
    writes = _count_writes(monkeypatch)

    async def transfer(i: int) -> list[Any]:
        async with batched.pipeline(transaction=True) as pipe:
            pipe.set(f"a{i}", i)
            pipe.incrby(f"a{i}", 100)
            pipe.get(f"a{i}")
            return await pipe.execute()

    results = await asyncio.gather(*(transfer(i) for i in range(5)), batched.incr("alone"))

    assert len(writes) == 1
    assert list(results[:5]) == [[True, 100 + i, str(100 + i).encode()] for i in range(5)]
    assert results[5] == 1


async def test_an_error_inside_a_batched_pipeline_reaches_only_its_caller(
    batched: BatchingRedis,
) -> None:
    await batched.set("text", "not a number")

    async def failing() -> list[Any]:
        async with batched.pipeline(transaction=False) as pipe:
            pipe.incr("text")
            pipe.incr("fine")
            return await pipe.execute()

    async def lenient() -> list[Any]:
        async with batched.pipeline(transaction=True) as pipe:
            pipe.incr("text")
            pipe.incr("also-fine")
            return await pipe.execute(raise_on_error=False)

    failed, kept, other = await asyncio.gather(
        failing(), lenient(), batched.incr("counter"), return_exceptions=True
    )

    assert isinstance(failed, ResponseError)
    assert isinstance(kept, list) and isinstance(kept[0], ResponseError) and kept[1] == 1
    assert other == 1
    assert await batched.get("fine") == b"1"  # the rest of the failing pipeline still ran


async def test_a_command_sent_later_rides_with_the_next_batch_or_leaves_alone(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()
    writes = _count_writes(monkeypatch)

    later = asyncio.create_task(batched.execute_later("SET", "event", "1"))
    await asyncio.sleep(0)  # queued, waiting for company
    assert await batched.incr("turn") == 1
    assert await later is True
    assert len(writes) == 1  # both in one write

    alone = await batched.execute_later("SET", "event", "2")  # nothing else comes: the timer
    assert alone is True
    assert len(writes) == 2
    assert await batched.get("event") == b"2"


async def test_work_a_caller_hands_to_tasks_still_makes_the_batch(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()
    writes = _count_writes(monkeypatch)

    async def nested() -> list[Any]:
        return list(await asyncio.gather(batched.incr("a"), batched.incr("b")))

    results = await asyncio.gather(batched.incr("c"), nested())

    assert results == [1, [1, 1]]
    assert len(writes) == 1
