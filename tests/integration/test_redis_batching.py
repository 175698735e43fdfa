"""`BatchingRedis` and `QuickConnection` (core/redis_client.py) against a real redis-server.

Commands issued in one turn of the event loop leave as one pipeline, counted here by wrapping
the connection's write; each caller still gets its own reply or its own error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.exceptions import ResponseError

import core.redis_client as redis_client_module
from core.envelopes import Address, Inbound
from core.mailbox.redis import RedisMailboxes
from core.redis_client import BatchingRedis, QuickConnection, redis_client
from core.redis_keys import RedisKeys
from tests.integration.redis_writes import count_writes


@pytest.fixture
async def batched(redis_url: str) -> AsyncIterator[BatchingRedis]:
    client = redis_client(redis_url, batching=True)
    assert isinstance(client, BatchingRedis)
    yield client
    await client.aclose()


async def test_commands_issued_together_share_one_round_trip(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()  # connected before counting
    writes = count_writes(monkeypatch)

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
    writes = count_writes(monkeypatch)

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
    writes = count_writes(monkeypatch)

    later = asyncio.create_task(batched.execute_later("SET", "event", "1"))
    await asyncio.sleep(0)  # queued, waiting for company
    assert await batched.incr("turn") == 1
    assert await later is True
    assert len(writes) == 1  # both in one write

    alone = await batched.execute_later("SET", "event", "2")  # nothing else comes: the timer
    assert alone is True
    assert len(writes) == 2
    assert await batched.get("event") == b"2"


async def test_a_script_sent_later_rides_with_the_next_batch_and_is_loaded_if_lost(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = batched.register_script("return redis.call('INCR', KEYS[1])")
    await batched.script_flush()  # as after a restart: Redis does not know it
    assert await batched.script_later(script, ["ran"], []) == 1  # loaded, then run once
    writes = count_writes(monkeypatch)
    monkeypatch.setattr(redis_client_module, "LATER_SECONDS", 60.0)

    later = asyncio.create_task(batched.script_later(script, ["ran"], []))
    for _ in range(10):  # long past the loop turns a command of its own waits for its batch
        await asyncio.sleep(0)
    assert not later.done() and writes == []
    assert await batched.incr("turn") == 1
    assert await later == 2
    assert len(writes) == 1


async def test_the_sweeps_look_for_waiting_mailboxes_rides_with_a_turns_writes(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailboxes = RedisMailboxes(batched, keys=RedisKeys("sweep"))
    waiting = Inbound(address=Address(platform="telegram", chat="7"), user_id="7", text="hi")
    await mailboxes.put(waiting)
    assert await mailboxes.pending() == [waiting.session_key]  # its script loaded, if new
    writes = count_writes(monkeypatch)
    monkeypatch.setattr(redis_client_module, "LATER_SECONDS", 60.0)  # held until company comes

    look = asyncio.create_task(mailboxes.pending())
    for _ in range(10):  # long past the loop turns a command of its own waits for its batch
        await asyncio.sleep(0)
    assert not look.done() and writes == []
    assert await batched.incr("turn") == 1
    assert await look == [waiting.session_key]
    # The look's list left with the turn's write; its sessions' leases (each in its own
    # cluster slot) are asked after, in one more write.
    assert len(writes) == 2

    monkeypatch.setattr(redis_client_module, "LATER_SECONDS", 0.02)
    assert await mailboxes.pending() == [waiting.session_key]  # alone: the timer sends it
    assert len(writes) == 4

    await batched.script_flush()  # Redis lost its scripts (a restart): loaded again
    assert await mailboxes.pending() == [waiting.session_key]


async def test_work_a_caller_hands_to_tasks_still_makes_the_batch(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await batched.ping()
    writes = count_writes(monkeypatch)

    async def nested() -> list[Any]:
        return list(await asyncio.gather(batched.incr("a"), batched.incr("b")))

    results = await asyncio.gather(batched.incr("c"), nested())

    assert results == [1, [1, 1]]
    assert len(writes) == 1


def _calls(client: Any) -> list[Callable[[], Awaitable[Any]]]:
    """Commands whose replies redis-py's callbacks and options shape, a server error among
    them; in order, each may depend on the ones before it."""
    script = client.register_script("return {KEYS[1], ARGV[1]}")
    return [
        lambda: client.set("s", "é"),
        lambda: client.set("s", "x", nx=True),  # not set: None
        lambda: client.get("s"),
        lambda: client.hset("h", mapping={"a": "1", "b": "2"}),
        lambda: client.hgetall("h"),
        lambda: client.zadd("z", {"m": 1.5, "n": 2}),
        lambda: client.zrange("z", 0, -1, withscores=True),
        lambda: client.exists("s", "h", "missing"),
        lambda: client.expire("s", 100),
        lambda: client.ttl("s"),
        lambda: client.lpush("l", "a", "b"),
        lambda: client.lrange("l", 0, -1),
        lambda: client.smembers("missing-set"),
        lambda: client.incrbyfloat("f", 0.25),
        lambda: client.ping(),
        lambda: script(keys=["k"], args=["v"]),
        lambda: client.incr("s"),  # a server error
        lambda: client.dump("s"),  # NEVER_DECODE: bytes even when decoding
        lambda: client.mget("s", "h"),  # EMPTY_RESPONSE on an error
        lambda: client.get("s"),
    ]


def _shown(reply: Any) -> Any:
    return ("error", str(reply)) if isinstance(reply, ResponseError) else reply


async def _replies(client: Any) -> list[Any]:
    """`_calls`, one at a time."""
    replies: list[Any] = []
    for call in _calls(client):
        try:
            replies.append(await call())
        except ResponseError as error:
            replies.append(_shown(error))
    return replies


@pytest.mark.parametrize("decode", [False, True])
async def test_batched_replies_are_those_a_plain_client_gets(redis_url: str, decode: bool) -> None:
    plain = redis_client(redis_url, decode_responses=decode)
    batched = redis_client(redis_url, batching=True, decode_responses=decode)
    try:
        await plain.flushdb()
        expected = await _replies(plain)
        await plain.flushdb()
        got = await _replies(batched)
    finally:
        await plain.aclose()
        await batched.aclose()

    assert got == expected
    assert got[4] == ({"a": "1", "b": "2"} if decode else {b"a": b"1", b"b": b"2"})
    assert got[-4][0] == "error"
    assert isinstance(got[-3], bytes)


@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("ours", [True, False], ids=["QuickConnection", "redis-py Connection"])
async def test_a_batch_of_many_callers_gets_each_its_own_shaped_reply(
    redis_url: str, decode: bool, ours: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Either kind of connection (`rediss://` and `unix://` keep redis-py's)."""
    from redis.asyncio.connection import Connection

    plain = redis_client(redis_url, decode_responses=decode)
    batched = redis_client(
        redis_url,
        batching=True,
        decode_responses=decode,
        connection_class=QuickConnection if ours else Connection,
    )
    try:
        await plain.flushdb()
        expected = await _replies(plain)
        await plain.flushdb()
        await batched.ping()
        writes = count_writes(monkeypatch, Connection if not ours else QuickConnection)
        got = await asyncio.gather(*(call() for call in _calls(batched)), return_exceptions=True)
    finally:
        await plain.aclose()
        await batched.aclose()

    assert len(writes) == 1  # every caller's command in one batch, in the order issued
    assert [_shown(reply) for reply in got] == expected


def test_commands_are_packed_byte_for_byte_as_redis_py_packs_them() -> None:
    from redis.asyncio.connection import Connection
    from redis.exceptions import DataError

    ours, theirs = QuickConnection(), Connection()
    for args in (
        ("GET", "k"),
        ("SCRIPT LOAD", "return 1"),
        (b"CLIENT SETNAME", b"name"),
        ("SET", "é", b"\x00\xff", 3, -2.5, 1e20, memoryview(b"view")),
        ("RPUSH", "l", bytearray(b"array")),
    ):
        assert b"".join(ours.pack_command(*args)) == b"".join(theirs.pack_command(*args))
    for bad in (None, True):
        with pytest.raises(DataError):
            ours.pack_command("SET", "k", bad)  # type: ignore[arg-type]


async def test_a_server_that_never_answers_times_out_and_the_connection_is_dropped() -> None:
    from redis.exceptions import TimeoutError as RedisTimeoutError

    received = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        received.set()
        await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = redis_client(f"redis://127.0.0.1:{port}", batching=True, socket_timeout=0.2)
    try:
        with pytest.raises(RedisTimeoutError):
            await asyncio.gather(client.get("a"), client.get("b"))
        assert received.is_set()
        pooled = client.connection_pool._available_connections
        assert pooled and not any(c.is_connected for c in pooled)  # given back, closed
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_a_read_the_system_times_out_is_an_error_not_empty_replies(
    redis_url: str,
) -> None:
    """A connection the kernel gives up on (ETIMEDOUT while replies are awaited) fails the
    batch's callers; it must not read as replies of nil."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    armed = {"on": False}

    class TimingOut(QuickConnection):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            await super().send_packed_command(command, check_health)
            if armed["on"]:
                armed["on"] = False
                # What the transport hands the stream when a read fails with ETIMEDOUT.
                self._reader.set_exception(TimeoutError(110, "Connection timed out"))  # type: ignore[union-attr]

    client = redis_client(redis_url, batching=True, connection_class=TimingOut)
    try:
        await client.set("a", "1")
        armed["on"] = True
        replies = await asyncio.gather(client.get("a"), client.get("b"), return_exceptions=True)
        again = await client.get("a")
    finally:
        await client.aclose()

    assert all(isinstance(r, RedisTimeoutError | RedisConnectionError) for r in replies), replies
    assert again == b"1"  # a new connection, not the one left with a reply unread


async def test_a_batch_on_a_connection_the_server_dropped_is_retried_on_a_new_one(
    redis_server: Any,
) -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    client = redis_client(redis_server.url, batching=True, retry=Retry(NoBackoff(), retries=2))
    try:
        await client.set("kept", "1")
        own = await client.client_id()  # the pool's one connection
        await _kill_client(redis_server.url, own)

        values = await asyncio.gather(client.incr("after"), client.get("kept"))
    finally:
        await client.aclose()

    assert list(values) == [1, b"1"]


async def _kill_client(url: str, client_id: int) -> None:
    """Close this client connection from the server's side (CLIENT KILL ID)."""
    admin = redis_client(url)
    try:
        assert await admin.client_kill_filter(_id=str(client_id)) == 1
    finally:
        await admin.aclose()


async def test_a_put_and_a_claim_with_the_set_of_waiting_sessions_leave_in_one_write(
    batched: BatchingRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The set of sessions with work lives in another cluster slot than the session's keys, so
    # it is written by a command of its own: on one server it leaves with the rest.
    mailboxes = RedisMailboxes(batched, keys=RedisKeys("one-write"))
    first = Inbound(address=Address(platform="telegram", chat="8"), user_id="8", text="a")
    second = Inbound(address=Address(platform="telegram", chat="9"), user_id="9", text="b")
    warm = await mailboxes.put_and_claim(first, owner="w1")  # its script loaded, if new
    assert warm is not None
    writes = count_writes(monkeypatch)

    await mailboxes.put(first)
    assert len(writes) == 1
    claim = await mailboxes.put_and_claim(second, owner="w1")
    assert claim is not None and len(writes) == 2
    assert await mailboxes.pending() == []  # both held

    await claim.release()
    await warm.release()
