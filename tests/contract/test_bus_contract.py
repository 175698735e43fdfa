"""The `Bus` contract: every implementation must pass these same cases.

The `bus` fixture is parametrized by implementation. To add one (e.g. Redis), add its name to
`params` and one branch in `bus` that opens it with `LEASE` and `MAX_DELIVERIES`.
Redelivery is waited for by awaiting `receive(timeout=...)`, never by sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from core.backends.redis.bus import RedisBus
from core.backends.sql.bus import SqliteBus
from core.bus import Bus, BusPayload, Delivery, Subscription
from core.envelopes import Address, Attachment, EventEnvelope, Inbound, Outbound
from core.errors import BusError
from core.messages import ImagePart
from tests.backends.memory_bus import MemoryBus

LEASE = 0.2
MAX_DELIVERIES = 3
# Long enough for a lease to run out, short enough that a broken bus fails the test quickly.
PATIENCE = LEASE * 10

ADDRESS = Address(platform="telegram", chat="42")


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster", "redis-sentinel"])
async def bus(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Bus]:
    """An empty bus of each implementation, closed after the test."""
    opened: Bus
    if request.param == "memory":
        opened = MemoryBus(lease_seconds=LEASE, max_deliveries=MAX_DELIVERIES)
    elif request.param == "sqlite":
        opened = await SqliteBus.open(
            tmp_path / "switchboard.db", lease_seconds=LEASE, max_deliveries=MAX_DELIVERIES
        )
    elif request.param == "redis":
        # Looked up here so that the memory cases never start a redis-server. The session's
        # server (not the async, flushing `redis_url`: an async fixture cannot be requested
        # from inside another one); every test uses fresh queue names, so none is flushed.
        server = request.getfixturevalue("redis_server")
        opened = await RedisBus.connect(
            server.url, lease_seconds=LEASE, max_deliveries=MAX_DELIVERIES
        )
    elif request.param in ("redis-cluster", "redis-sentinel"):
        # A 3-node Redis Cluster (every script and command stays within one slot), or the
        # session's server as the master a Sentinel names.
        where = request.getfixturevalue(request.param.replace("-", "_"))
        opened = await RedisBus.connect(
            where.url, lease_seconds=LEASE, max_deliveries=MAX_DELIVERIES
        )
    else:
        raise AssertionError(f"no bus implementation named {request.param!r}")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def queue() -> str:
    """A queue name no other test uses, so shared backends need no cleanup between tests."""
    return f"contract.{uuid.uuid4().hex}"


def _inbound(text: str = "hello") -> Inbound:
    return Inbound(
        address=ADDRESS,
        user_id="u1",
        text=text,
        images=[ImagePart(media_type="image/png", data=b"\x89PNG\r\n\x1a\n\x00\xff\xfe")],
        is_direct=True,
        platform_message_id="m-7",
    )


def _outbound(text: str = "hi there") -> Outbound:
    return Outbound(kind="reply", address=ADDRESS, text=text, reply_to="in-1")


def _event(name: str = "agent.run.start") -> EventEnvelope:
    return EventEnvelope(
        name=name,
        session_id="s1",
        run_id="r1",
        session_key=ADDRESS.session_key,
        data={"step": 2, "tools": ["clock", "calculator"], "cost": 0.25, "nested": {"ok": True}},
    )


async def _receive(bus: Bus, queue: str, consumer: str = "c1") -> Delivery:
    """The next delivery, failing the test if none comes within `PATIENCE`."""
    delivery = await bus.receive(queue, consumer=consumer, timeout=PATIENCE)
    assert delivery is not None, "expected a delivery"
    return delivery


async def _next(subscription: Subscription) -> BusPayload:
    return await asyncio.wait_for(anext(aiter(subscription)), PATIENCE)


async def _drain(subscription: Subscription) -> list[BusPayload]:
    """Everything left in an ended subscription (it must end on its own)."""

    async def collect() -> list[BusPayload]:
        return [payload async for payload in subscription]

    return await asyncio.wait_for(collect(), PATIENCE)


async def _still_pending(task: asyncio.Task[Delivery | None]) -> bool:
    """Whether `task` is still waiting after a moment (it should be blocked on the bus)."""
    done, _ = await asyncio.wait({task}, timeout=LEASE / 4)
    return not done


# Queues: delivery


@pytest.mark.parametrize(
    "make", [_inbound, _outbound, _event], ids=["inbound", "outbound", "event"]
)
async def test_enqueue_receive_ack_round_trips_the_payload(
    bus: Bus, queue: str, make: Callable[[], BusPayload]
) -> None:
    payload = make()
    entry_id = await bus.enqueue(queue, payload)

    delivery = await _receive(bus, queue)
    assert delivery.id == entry_id
    assert delivery.attempt == 1
    assert type(delivery.envelope) is type(payload)
    assert delivery.envelope == payload

    await delivery.ack()
    assert await bus.receive(queue, consumer="c1", timeout=LEASE * 2) is None
    assert await bus.dead_letters(queue) == []


async def test_an_envelope_enqueued_twice_under_one_dedupe_id_is_delivered_once(
    bus: Bus, queue: str
) -> None:
    first, second = _outbound("reply"), _outbound("the same reply, sent again")
    dedupe = f"{queue}:reply-of-message-1"

    entry_id = await bus.enqueue(queue, first, dedupe_id=dedupe)
    assert entry_id is not None
    assert await bus.enqueue(queue, second, dedupe_id=dedupe) is None
    assert await bus.enqueue(queue, second, dedupe_id=f"{dedupe}-other") is not None

    delivered = [await _receive(bus, queue), await _receive(bus, queue)]
    assert [d.envelope for d in delivered] == [first, second]
    for delivery in delivered:
        await delivery.ack()
    assert await bus.receive(queue, consumer="c1", timeout=LEASE) is None


async def test_image_bytes_survive_the_trip(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _inbound())

    delivery = await _receive(bus, queue)
    assert isinstance(delivery.envelope, Inbound)
    assert delivery.envelope.images[0].data == b"\x89PNG\r\n\x1a\n\x00\xff\xfe"
    await delivery.ack()


async def test_a_files_bytes_survive_the_trip(bus: Bus, queue: str) -> None:
    data = os.urandom(1024 * 1024)  # a megabyte of anything: not UTF-8, not compressible
    picture = Attachment(name="photo.jpg", media_type="image/jpeg", data=data, image=True)
    address = Address(platform="telegram", chat="42")
    await bus.enqueue(queue, Outbound(kind="file", address=address, attachments=[picture]))

    delivery = await _receive(bus, queue)
    assert isinstance(delivery.envelope, Outbound)
    assert delivery.envelope.attachments == [picture]
    await delivery.ack()


async def test_entries_come_out_in_order_with_distinct_ids(bus: Bus, queue: str) -> None:
    payloads = [_outbound(f"n{n}") for n in range(5)]
    ids = [await bus.enqueue(queue, payload) for payload in payloads]
    assert len(set(ids)) == len(ids)

    received = []
    for _ in ids:
        delivery = await _receive(bus, queue)
        received.append(delivery)
        await delivery.ack()
    assert [d.id for d in received] == ids
    assert [d.envelope for d in received] == payloads


async def test_queues_are_separate(bus: Bus, queue: str) -> None:
    other = f"{queue}.other"
    await bus.enqueue(other, _outbound("elsewhere"))

    assert await bus.receive(queue, consumer="c1", timeout=0) is None
    delivery = await _receive(bus, other)
    assert isinstance(delivery.envelope, Outbound)
    assert delivery.envelope.text == "elsewhere"
    await delivery.ack()


async def test_competing_consumers_get_distinct_entries(bus: Bus, queue: str) -> None:
    ids = {await bus.enqueue(queue, _outbound(f"n{n}")) for n in range(6)}

    deliveries = [await _receive(bus, queue, consumer=f"c{n % 2}") for n in range(6)]
    assert {d.id for d in deliveries} == ids
    assert len(deliveries) == len(ids)
    assert await bus.receive(queue, consumer="c2", timeout=0) is None
    for delivery in deliveries:
        await delivery.ack()


async def test_blocked_consumers_share_entries_enqueued_later(bus: Bus, queue: str) -> None:
    waiting = [
        asyncio.create_task(bus.receive(queue, consumer=f"c{n}", timeout=PATIENCE))
        for n in range(4)
    ]
    ids = {await bus.enqueue(queue, _outbound(f"n{n}")) for n in range(4)}

    deliveries = await asyncio.gather(*waiting)
    assert all(d is not None for d in deliveries)
    assert {d.id for d in deliveries if d is not None} == ids
    for delivery in deliveries:
        assert delivery is not None
        await delivery.ack()


async def test_receive_on_an_empty_queue_times_out_with_none(bus: Bus, queue: str) -> None:
    assert await bus.receive(queue, consumer="c1", timeout=0) is None
    assert await bus.receive(queue, consumer="c1", timeout=LEASE / 2) is None


async def test_a_blocked_receive_wakes_when_an_entry_arrives(bus: Bus, queue: str) -> None:
    task = asyncio.create_task(bus.receive(queue, consumer="c1", timeout=PATIENCE))
    assert await _still_pending(task)

    payload = _outbound()
    entry_id = await bus.enqueue(queue, payload)
    delivery = await task
    assert delivery is not None
    assert delivery.id == entry_id
    assert delivery.envelope == payload
    await delivery.ack()


# Queues: acknowledgement and redelivery


async def test_an_unacked_entry_is_redelivered_after_the_lease(bus: Bus, queue: str) -> None:
    payload = _outbound()
    entry_id = await bus.enqueue(queue, payload)
    first = await _receive(bus, queue, consumer="a")
    assert await bus.receive(queue, consumer="b", timeout=0) is None  # leased to "a"

    # It comes when the lease runs out, not when a receive willing to wait an hour gives up.
    second = await asyncio.wait_for(bus.receive(queue, consumer="b", timeout=3600), PATIENCE * 5)
    assert second is not None
    assert second.id == first.id == entry_id
    assert (first.attempt, second.attempt) == (1, 2)
    assert second.envelope == payload
    await second.ack()


async def test_nack_redelivers_at_once(bus: Bus, queue: str) -> None:
    payload = _event()
    await bus.enqueue(queue, payload)
    first = await _receive(bus, queue, consumer="a")
    await first.nack()

    # Well before the lease would have run out.
    second = await bus.receive(queue, consumer="b", timeout=LEASE / 2)
    assert second is not None
    assert second.id == first.id
    assert second.attempt == 2
    assert second.envelope == payload
    await second.ack()


async def test_redelivered_entries_come_before_new_ones(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _outbound("old"))
    old = await _receive(bus, queue)
    await old.nack()
    await bus.enqueue(queue, _outbound("new"))

    again = await _receive(bus, queue)
    assert again.id == old.id
    new = await _receive(bus, queue)
    assert isinstance(new.envelope, Outbound)
    assert new.envelope.text == "new"
    await again.ack()
    await new.ack()


async def test_ack_is_idempotent(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _outbound())
    delivery = await _receive(bus, queue)
    await delivery.ack()
    await delivery.ack()

    assert await bus.receive(queue, consumer="c1", timeout=LEASE * 2) is None
    assert await bus.dead_letters(queue) == []


async def test_a_stale_ack_leaves_the_entry_with_its_new_holder(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _outbound())
    stale = await _receive(bus, queue, consumer="a")
    holder = await _receive(bus, queue, consumer="b")  # after a's lease ran out
    assert holder.attempt == 2

    await stale.ack()

    # Had the stale ack removed the entry, b's lease running out would bring nothing back.
    third = await _receive(bus, queue, consumer="c")
    assert third.id == holder.id
    assert third.attempt == 3
    await third.ack()


async def test_the_new_holder_can_ack_after_a_stale_ack(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _outbound())
    stale = await _receive(bus, queue, consumer="a")
    holder = await _receive(bus, queue, consumer="b")
    assert holder.id == stale.id

    await stale.ack()
    await holder.ack()

    assert await bus.receive(queue, consumer="c", timeout=LEASE * 2) is None
    assert await bus.dead_letters(queue) == []


async def test_a_stale_nack_does_not_release_the_new_holders_lease(bus: Bus, queue: str) -> None:
    await bus.enqueue(queue, _outbound())
    # Before the stale lease began; the holder's begins a lease later at the earliest (the
    # receives may return late on a loaded machine, so their return times bound nothing).
    asked_at = time.monotonic()
    stale = await _receive(bus, queue, consumer="a")
    holder = await _receive(bus, queue, consumer="b")

    await stale.nack()

    again = await bus.receive(queue, consumer="c", timeout=LEASE / 4)
    if again is not None:
        # Only the holder's own lease running out may hand the entry on (on a loaded machine
        # the check above can come that late); the stale nack must not have.
        assert time.monotonic() - asked_at >= 2 * LEASE
        assert again.attempt == 3
    await holder.ack()


async def test_after_max_deliveries_by_nack_the_entry_is_dead_lettered(
    bus: Bus, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    poison = _inbound("poison")
    entry_id = await bus.enqueue(queue, poison)
    assert entry_id is not None
    for attempt in range(1, MAX_DELIVERIES + 1):
        delivery = await _receive(bus, queue)
        assert delivery.attempt == attempt
        await delivery.nack()
    await bus.enqueue(queue, _outbound("next"))

    # The poison entry is skipped; work behind it still flows.
    after = await _receive(bus, queue)
    assert isinstance(after.envelope, Outbound)
    assert after.envelope.text == "next"
    await after.ack()
    assert await bus.receive(queue, consumer="c1", timeout=LEASE * 2) is None

    assert await bus.dead_letters(queue) == [poison]
    assert any(
        record.levelno == logging.WARNING
        and entry_id in record.getMessage()
        and queue in record.getMessage()
        for record in caplog.records
    )


async def test_after_max_deliveries_by_expiry_the_entry_is_dead_lettered(
    bus: Bus, queue: str
) -> None:
    payload = _event()
    await bus.enqueue(queue, payload)
    attempts = [(await _receive(bus, queue, consumer=f"c{n}")).attempt for n in range(3)]
    assert attempts == list(range(1, MAX_DELIVERIES + 1))

    assert await bus.receive(queue, consumer="late", timeout=LEASE * 2) is None
    assert await bus.dead_letters(queue) == [payload]
    assert await bus.dead_letters(f"{queue}.other") == []


# Topics


async def test_every_subscriber_gets_a_published_event(bus: Bus) -> None:
    first = await bus.subscribe("events.contract")
    second = await bus.subscribe("events.contract")

    event = _event("agent.run.complete")
    await bus.publish("events.contract", event)

    assert await _next(first) == event
    assert await _next(second) == event
    await first.aclose()
    await second.aclose()


async def test_publishing_with_no_subscribers_is_dropped(bus: Bus) -> None:
    await bus.publish("events.contract", _event("before"))
    subscription = await bus.subscribe("events.contract")
    after = _event("after")
    await bus.publish("events.contract", after)

    assert await _next(subscription) == after
    await subscription.aclose()


async def test_topics_are_separate(bus: Bus) -> None:
    subscription = await bus.subscribe("events.contract")
    await bus.publish("events.other", _event("elsewhere"))
    here = _event("here")
    await bus.publish("events.contract", here)

    assert await _next(subscription) == here
    await subscription.aclose()


async def test_after_aclose_a_subscriber_gets_nothing_more(bus: Bus) -> None:
    leaving = await bus.subscribe("events.contract")
    staying = await bus.subscribe("events.contract")
    await leaving.aclose()

    event = _event()
    await bus.publish("events.contract", event)

    assert await _next(staying) == event
    assert await _drain(leaving) == []
    await staying.aclose()


async def test_aclose_ends_a_pending_iteration(bus: Bus) -> None:
    subscription = await bus.subscribe("events.contract")
    reader = asyncio.create_task(_drain(subscription))
    done, _ = await asyncio.wait({reader}, timeout=LEASE / 4)
    assert not done

    await subscription.aclose()
    assert await reader == []


# Closing


async def test_close_makes_a_blocked_receive_return_none(bus: Bus, queue: str) -> None:
    task = asyncio.create_task(bus.receive(queue, consumer="c1", timeout=None))
    assert await _still_pending(task)

    await bus.close()
    assert await asyncio.wait_for(task, PATIENCE) is None


async def test_close_ends_subscriptions(bus: Bus) -> None:
    subscription = await bus.subscribe("events.contract")
    reader = asyncio.create_task(_drain(subscription))

    await bus.close()
    assert await reader == []


async def test_after_close_enqueue_publish_and_receive_raise(bus: Bus, queue: str) -> None:
    await bus.close()
    await bus.close()  # idempotent

    with pytest.raises(BusError):
        await bus.receive(queue, consumer="c1", timeout=0)
    with pytest.raises(BusError):
        await bus.enqueue(queue, _outbound())
    with pytest.raises(BusError):
        await bus.publish("events.contract", _event())


# Durability (the SQLite bus only: the memory bus keeps nothing, Redis is restarted elsewhere)


async def test_sqlite_entries_not_acked_survive_a_restart(tmp_path: Path, queue: str) -> None:
    path = tmp_path / "switchboard.db"
    bus = await SqliteBus.open(path, lease_seconds=60.0, max_deliveries=MAX_DELIVERIES)
    for text in ("leased", "acked", "waiting"):
        await bus.enqueue(queue, _inbound(text), dedupe_id=f"id-{text}")
    leased = await _receive(bus, queue)
    acked = await _receive(bus, queue)
    await acked.ack()
    assert isinstance(leased.envelope, Inbound) and leased.envelope.text == "leased"
    # The process dies holding a lease; the next one takes the queues over.
    await bus.close()
    reopened = await SqliteBus.open(
        path, lease_seconds=60.0, max_deliveries=MAX_DELIVERIES, take_over=True
    )
    try:
        texts = []
        while (delivery := await reopened.receive(queue, consumer="c2", timeout=0)) is not None:
            assert isinstance(delivery.envelope, Inbound)
            texts.append(delivery.envelope.text)
            await delivery.ack()
        assert texts == ["leased", "waiting"]  # the lease left behind is redelivered first
        assert await reopened.enqueue(queue, _inbound("again"), dedupe_id="id-acked") is None
    finally:
        await reopened.close()


async def test_sqlite_leases_are_kept_by_a_reader_that_does_not_take_over(
    tmp_path: Path, queue: str
) -> None:
    path = tmp_path / "switchboard.db"
    bus = await SqliteBus.open(path, lease_seconds=60.0, max_deliveries=MAX_DELIVERIES)
    await bus.enqueue(queue, _inbound())
    held = await _receive(bus, queue)
    looker = await SqliteBus.open(path, lease_seconds=60.0, max_deliveries=MAX_DELIVERIES)
    try:
        assert await looker.receive(queue, consumer="c2", timeout=0) is None
        await held.ack()
    finally:
        await looker.close()
        await bus.close()
