"""`RedisBus` behaviour the in-memory bus cannot have: several processes, durability, restarts.

The shared semantics are in `tests/contract/test_bus_contract.py`; these cases drive the real
redis-py client against the suite's own `redis-server`. Nothing sleeps: redelivery is waited
for by awaiting `receive(timeout=...)`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import pytest
import redis.asyncio as aioredis
from redis.typing import EncodableT, FieldT

from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.envelopes import Address, EventEnvelope, Outbound
from core.errors import BusError
from core.tasks import cancel_and_wait
from tests.integration.redis_writes import record_writes
from tests.redis_server import RedisServer

LEASE = 0.2
# The default bot's keys: the buses here name no bot.
KEYS = RedisKeys()
PATIENCE = LEASE * 10

ADDRESS = Address(platform="telegram", chat="42")

OpenBus = Callable[..., Awaitable[RedisBus]]


def _outbound(text: str) -> Outbound:
    return Outbound(kind="reply", address=ADDRESS, text=text)


@pytest.fixture
def queue() -> str:
    return f"it.{uuid.uuid4().hex}"


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test server, to look at (and tamper with) the keys."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def _add(raw: aioredis.Redis, stream: str, fields: dict[FieldT, EncodableT]) -> str:
    """`XADD` straight to a stream; the new entry's id."""
    entry_id = await raw.xadd(stream, fields)
    assert isinstance(entry_id, bytes)  # `raw` does not decode responses
    return entry_id.decode()


async def _entries(raw: aioredis.Redis, stream: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """`XRANGE` of a whole stream, typed as `raw` (which does not decode responses) returns it."""
    return cast(list[tuple[bytes, dict[bytes, bytes]]], await raw.xrange(stream))


@pytest.fixture
async def open_bus(redis_url: str) -> AsyncIterator[OpenBus]:
    """Opens `RedisBus`es on the test server (lease `LEASE` unless told); all closed after."""
    opened: list[RedisBus] = []

    async def open_(*, lease_seconds: float = LEASE, maxlen: int = 100_000) -> RedisBus:
        opened.append(await RedisBus.connect(redis_url, lease_seconds=lease_seconds, maxlen=maxlen))
        return opened[-1]

    yield open_
    for bus in opened:
        await bus.close()


async def test_entries_outlive_the_bus_object(open_bus: OpenBus, queue: str) -> None:
    producer = await open_bus()
    ids = [await producer.enqueue(queue, _outbound(f"n{n}")) for n in range(2)]
    await producer.close()

    consumer = await open_bus()
    for entry_id, text in zip(ids, ["n0", "n1"], strict=True):
        delivery = await consumer.receive(queue, consumer="c1", timeout=0)
        assert delivery is not None
        assert delivery.id == entry_id
        assert isinstance(delivery.envelope, Outbound)
        assert delivery.envelope.text == text
        await delivery.ack()
    assert await consumer.receive(queue, consumer="c1", timeout=0) is None


async def test_a_vanished_consumers_entry_goes_to_another_after_the_lease(
    open_bus: OpenBus, queue: str
) -> None:
    crashing = await open_bus()
    survivor = await open_bus()
    entry_id = await survivor.enqueue(queue, _outbound("work"))
    taken = await crashing.receive(queue, consumer="worker-1", timeout=0)
    assert taken is not None
    await crashing.close()  # never acks: the process died mid-turn

    assert await survivor.receive(queue, consumer="worker-2", timeout=0) is None  # leased
    again = await survivor.receive(queue, consumer="worker-2", timeout=PATIENCE)
    assert again is not None
    assert (again.id, again.attempt) == (entry_id, 2)
    assert again.envelope == taken.envelope
    await again.ack()


async def test_two_buses_share_a_queue_without_duplicates(
    open_bus: OpenBus, queue: str, raw: aioredis.Redis
) -> None:
    # Leases far longer than the test: any duplicate would be a bug, not a redelivery.
    first, second = await open_bus(lease_seconds=60), await open_bus(lease_seconds=60)
    enqueued = {await first.enqueue(queue, _outbound(f"n{n}")) for n in range(200)}
    received: dict[str, list[str]] = {"first": [], "second": []}

    async def work(bus: RedisBus, name: str, consumer: str) -> None:
        while sum(map(len, received.values())) < len(enqueued):
            delivery = await bus.receive(queue, consumer=consumer, timeout=LEASE)
            if delivery is not None:
                received[name].append(delivery.id)
                await delivery.ack()

    async with asyncio.timeout(PATIENCE * 5):
        await asyncio.gather(
            *(work(first, "first", f"first-{n}") for n in range(3)),
            *(work(second, "second", f"second-{n}") for n in range(3)),
        )

    everything = received["first"] + received["second"]
    assert len(everything) == len(set(everything)) == len(enqueued)
    assert set(everything) == enqueued
    assert received["first"] and received["second"]
    # Acked entries are deleted, not only acknowledged.
    assert await raw.xlen(KEYS.queue_stream(queue)) == 0
    assert (await raw.xpending(KEYS.queue_stream(queue), "switchboard"))["pending"] == 0


async def test_maxlen_keeps_the_stream_bounded(
    open_bus: OpenBus, queue: str, raw: aioredis.Redis
) -> None:
    bus = await open_bus(maxlen=10)
    first_id = await bus.enqueue(queue, _outbound("n0"))
    assert first_id is not None
    for n in range(1, 500):
        await bus.enqueue(queue, _outbound(f"n{n}"))

    # `MAXLEN ~` trims whole stream nodes (100 entries each by default), so "about" 10.
    length = await raw.xlen(KEYS.queue_stream(queue))
    assert 10 <= length <= 10 + 100
    assert await raw.xrange(KEYS.queue_stream(queue), first_id, first_id) == []


def _first_command(write: bytes) -> bytes:
    """The name of the first command in one write (`*N`, `$len`, name)."""
    return write.split(b"\r\n", 3)[2]


async def test_a_receive_after_one_that_waited_in_vain_waits_for_new_work_first(
    open_bus: OpenBus, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus = await open_bus(lease_seconds=0.1)
    # A loop over a quiet queue: this receive waits (0.05 s at a time) and gives up, its
    # last act a look for expired leases.
    assert await bus.receive(queue, consumer="c", timeout=0.12) is None
    writes = record_writes(monkeypatch)
    # Without waiting, it still looks (and only looks).
    assert await bus.receive(queue, consumer="c", timeout=0) is None
    assert [_first_command(write) for write in writes] == [b"EVALSHA"]
    writes.clear()

    receiving = asyncio.create_task(bus.receive(queue, consumer="c", timeout=None))
    await bus.enqueue(queue, _outbound("hello"))
    delivery = await asyncio.wait_for(receiving, PATIENCE)
    assert delivery is not None and cast(Outbound, delivery.envelope).text == "hello"
    # The next one went straight to its wait, which brought the entry: no look at all.
    assert b"XREADGROUP" in [_first_command(write) for write in writes]
    assert not any(b"\r\nEVALSHA\r\n" in write for write in writes)
    await delivery.ack()

    # Having found work, the next receive looks first again.
    writes.clear()
    assert await bus.receive(queue, consumer="c", timeout=0.01) is None
    assert _first_command(writes[0]) == b"EVALSHA"


async def test_an_undecodable_entry_is_dead_lettered_without_blocking_the_queue(
    open_bus: OpenBus, queue: str, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    bus = await open_bus()
    garbage_id = await _add(raw, KEYS.queue_stream(queue), {"data": b"\xc1 not msgpack"})
    fieldless_id = await _add(raw, KEYS.queue_stream(queue), {"other": b"x"})
    good = _outbound("after the garbage")
    await bus.enqueue(queue, good)

    delivery = await bus.receive(queue, consumer="c1", timeout=0)
    assert delivery is not None
    assert delivery.envelope == good
    await delivery.ack()
    assert await bus.receive(queue, consumer="c1", timeout=0) is None

    buried = await _entries(raw, KEYS.dead_letters(queue))
    assert [(fields[b"id"].decode(), fields[b"reason"]) for _, fields in buried] == [
        (garbage_id, b"undecodable"),
        (fieldless_id, b"undecodable"),
    ]
    assert buried[0][1][b"data"] == b"\xc1 not msgpack"  # kept for whoever investigates
    # Only decodable envelopes are listed.
    assert await bus.dead_letters(queue) == []
    logged = [record.getMessage() for record in caplog.records]
    assert any(garbage_id in message and queue in message for message in logged)


async def test_while_redis_is_down_calls_raise_and_after_a_restart_they_work(
    open_bus: OpenBus, redis_server: RedisServer, queue: str
) -> None:
    bus = await open_bus()
    await bus.enqueue(queue, _outbound("before"))
    before = await bus.receive(queue, consumer="c1", timeout=0)
    assert before is not None
    await before.ack()
    waiting = asyncio.create_task(bus.receive(queue, consumer="c1", timeout=None))
    await asyncio.wait({waiting}, timeout=LEASE / 4)
    assert not waiting.done()

    await asyncio.to_thread(redis_server.stop)
    try:
        with pytest.raises(BusError, match="unreachable"):
            await waiting  # a blocked receive fails instead of hanging
        with pytest.raises(BusError):
            await bus.receive(queue, consumer="c1", timeout=0)
        with pytest.raises(BusError):
            await bus.enqueue(queue, _outbound("lost"))
        with pytest.raises(BusError) as refused:
            await RedisBus.connect(f"redis://:s3cret@127.0.0.1:{redis_server.port}/0")
        assert "s3cret" not in str(refused.value)
    finally:
        # Back on the same port, with none of the data (no persistence).
        await asyncio.to_thread(redis_server.start)

    # The stream and its group are gone; enqueueing before any receive must not lose work.
    after = _outbound("after")
    entry_id = await bus.enqueue(queue, after)
    delivery = await bus.receive(queue, consumer="c1", timeout=PATIENCE)
    assert delivery is not None
    assert (delivery.id, delivery.attempt, delivery.envelope) == (entry_id, 1, after)
    await delivery.ack()


async def test_every_subscriber_on_every_bus_gets_a_published_event(open_bus: OpenBus) -> None:
    publisher, first, second = await open_bus(), await open_bus(), await open_bus()
    subscriptions = [await first.subscribe("events.it"), await second.subscribe("events.it")]
    event = EventEnvelope(name="agent.run.start", session_id="s1", run_id="r1")

    await publisher.publish("events.it", event)

    for subscription in subscriptions:
        async with asyncio.timeout(PATIENCE):
            assert await anext(aiter(subscription)) == event
        await subscription.aclose()


async def test_a_shared_client_speaking_resp3_is_used_and_left_open(
    redis_url: str, queue: str
) -> None:
    client = aioredis.Redis.from_url(redis_url, protocol=3)
    try:
        bus = RedisBus(redis_url, lease_seconds=LEASE, client=client)
        # The blocking read's reply is parsed differently under RESP3.
        waiting = asyncio.create_task(bus.receive(queue, consumer="c1", timeout=PATIENCE))
        await asyncio.wait({waiting}, timeout=LEASE / 4)
        entry_id = await bus.enqueue(queue, _outbound("resp3"))
        delivery = await waiting
        assert delivery is not None
        assert (delivery.id, delivery.attempt) == (entry_id, 1)
        await delivery.ack()
        await bus.close()

        assert await client.ping()
    finally:
        await client.aclose()


async def test_a_client_that_decodes_responses_is_refused(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode"):
            RedisBus(redis_url, client=client)
    finally:
        await client.aclose()


async def test_a_receive_cancelled_mid_wait_ends_at_once_and_the_bus_goes_on(
    open_bus: OpenBus, queue: str
) -> None:
    bus = await open_bus()
    # Nothing queued: the receive sits in Redis's blocking read (up to 30 s).
    waiting = asyncio.create_task(bus.receive(queue, consumer="c", timeout=30))
    started, _ = await asyncio.wait({waiting}, timeout=LEASE)
    assert not started
    # Cancelled as the worker cancels (`cancel_and_wait`: on Python 3.11 redis-py's
    # `wait_for` can swallow one cancellation that lands as the read returns).
    await asyncio.wait_for(cancel_and_wait(waiting), PATIENCE)

    assert waiting.cancelled() or waiting.result() is None  # nothing was taken
    await bus.enqueue(queue, _outbound("after"))
    delivery = await bus.receive(queue, consumer="c", timeout=PATIENCE)
    assert delivery is not None
    assert isinstance(delivery.envelope, Outbound) and delivery.envelope.text == "after"
