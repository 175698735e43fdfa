"""`MemoryBus`: a `Bus` within one process on one asyncio loop, nothing kept, for tests (the
product's buses are `SqliteBus` and `RedisBus`; its topics are `core.backends.sql.local_topics`).

Entries are kept encoded (the msgpack bytes of `core.envelopes.encode`) and decoded on every
receive, so a payload behaves exactly as it does after a round trip through Redis: no shared
mutable objects between producer and consumer, and an unencodable envelope fails at `enqueue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from core.backends.sql.local_topics import LocalTopics
from core.bus.base import Bus, BusPayload, DeadLetter, Delivery, Subscription
from core.bus.stats import QueueStats, enqueued_at
from core.clock import utc_now
from core.envelopes import decode, encode
from core.errors import BusError

__all__ = ["MemoryBus"]

logger = logging.getLogger(__name__)

# How many dedupe ids the in-memory bus remembers (a day of replies on a busy process).
_DEDUPE_MEMORY = 100_000


class _Entry:
    """One unacked queue entry.

    `deliveries` doubles as the token of the current lease: a `Delivery` remembers the count
    it was handed out with, so an ack or nack from an older delivery no longer matches.
    """

    __slots__ = ("consumer", "data", "deliveries", "id", "leased", "seq")

    def __init__(self, seq: int, data: bytes) -> None:
        self.seq = seq
        self.id = f"{seq}-0"
        self.data = data
        self.deliveries = 0
        self.leased = False
        self.consumer = ""


class _WorkQueue:
    """The state of one work queue; synchronous, so every method is atomic on the loop."""

    def __init__(self, name: str, *, lease_seconds: float, max_deliveries: int) -> None:
        self.name = name
        self.changed = asyncio.Condition()
        self._lease_seconds = lease_seconds
        self._max_deliveries = max_deliveries
        self._last_seq = 0
        # Every entry neither acked nor dead, by sequence number.
        self._entries: dict[int, _Entry] = {}
        self._fresh: deque[_Entry] = deque()
        # Sequence numbers waiting for redelivery (min-heap: oldest first). Acked entries are
        # left in the heaps and skipped when they surface.
        self._retry: list[int] = []
        # (expires_at, seq, deliveries) of every lease handed out.
        self._leases: list[tuple[float, int, int]] = []
        # (entry id, data, deliveries) of every entry given up on, oldest first.
        self._dead: list[tuple[str, bytes, int]] = []

    def append(self, data: bytes) -> str:
        self._last_seq += 1
        entry = _Entry(self._last_seq, data)
        self._entries[entry.seq] = entry
        self._fresh.append(entry)
        return entry.id

    def take(self, now: float, consumer: str) -> _Entry | None:
        """Lease the next available entry to `consumer`: redeliveries first, then new ones."""
        self.expire_leases(now)
        entry = self._next_available()
        if entry is None:
            return None
        entry.deliveries += 1
        entry.leased = True
        entry.consumer = consumer
        heapq.heappush(self._leases, (now + self._lease_seconds, entry.seq, entry.deliveries))
        return entry

    def ack(self, seq: int, deliveries: int) -> None:
        entry = self._entries.get(seq)
        if entry is not None and entry.deliveries == deliveries:
            del self._entries[seq]

    def nack(self, seq: int, deliveries: int) -> bool:
        """Release the lease now; False if that delivery no longer holds the entry."""
        entry = self._entries.get(seq)
        if entry is None or not entry.leased or entry.deliveries != deliveries:
            return False
        self._release(entry)
        return True

    def expire_leases(self, now: float) -> bool:
        """Release every lease that ran out by `now`; True if any did."""
        expired = False
        while self._leases and self._leases[0][0] <= now:
            _, seq, deliveries = heapq.heappop(self._leases)
            entry = self._entries.get(seq)
            if entry is not None and entry.leased and entry.deliveries == deliveries:
                self._release(entry)
                expired = True
        return expired

    def next_expiry(self) -> float | None:
        """When the earliest live lease runs out, if any is held."""
        while self._leases and not self._holds_lease(*self._leases[0][1:]):
            heapq.heappop(self._leases)
        return self._leases[0][0] if self._leases else None

    def dead_letters(self) -> list[tuple[str, bytes, int]]:
        return list(self._dead)

    def drop_dead(self, entry_id: str) -> bool:
        kept = [dead for dead in self._dead if dead[0] != entry_id]
        dropped = len(kept) != len(self._dead)
        self._dead = kept
        return dropped

    def stats(self) -> QueueStats:
        oldest = next(iter(self._entries.values()), None)
        age = 0.0
        if oldest is not None:
            age = max((utc_now() - enqueued_at(decode(oldest.data))).total_seconds(), 0.0)
        return QueueStats(depth=len(self._entries), oldest_seconds=age, dead=len(self._dead))

    def _holds_lease(self, seq: int, deliveries: int) -> bool:
        entry = self._entries.get(seq)
        return entry is not None and entry.leased and entry.deliveries == deliveries

    def _next_available(self) -> _Entry | None:
        while self._retry:
            entry = self._entries.get(heapq.heappop(self._retry))
            if entry is not None and not entry.leased:
                return entry
        return self._fresh.popleft() if self._fresh else None

    def _release(self, entry: _Entry) -> None:
        entry.leased = False
        if entry.deliveries < self._max_deliveries:
            heapq.heappush(self._retry, entry.seq)
            return
        # Its next delivery would exceed the limit: park it where an operator can look.
        del self._entries[entry.seq]
        self._dead.append((entry.id, entry.data, entry.deliveries))
        logger.warning(
            "bus entry %s on queue %s dead-lettered after %d deliveries (last consumer %s)",
            entry.id,
            self.name,
            entry.deliveries,
            entry.consumer,
        )


class _MemoryDelivery(Delivery):
    """One lease on a `_WorkQueue` entry."""

    __slots__ = ("_attempt", "_envelope", "_id", "_queue", "_seq")

    def __init__(self, queue: _WorkQueue, entry: _Entry) -> None:
        self._queue = queue
        self._seq = entry.seq
        self._id = entry.id
        self._attempt = entry.deliveries
        self._envelope = decode(entry.data)

    @property
    def id(self) -> str:
        """The entry id, the same on every delivery of the entry."""
        return self._id

    @property
    def envelope(self) -> BusPayload:
        """The payload, decoded afresh for this delivery."""
        return self._envelope

    @property
    def attempt(self) -> int:
        """1 on first delivery, 2 on the first redelivery, and so on."""
        return self._attempt

    async def ack(self) -> None:
        """Done; a no-op when repeated or when the lease already passed to someone else."""
        self._queue.ack(self._seq, self._attempt)

    async def nack(self) -> None:
        """Give the entry back for redelivery now; a no-op if this lease is no longer held."""
        async with self._queue.changed:
            if self._queue.nack(self._seq, self._attempt):
                self._queue.changed.notify_all()


class MemoryBus(Bus):
    """Work queues and topics in this process's memory (tests only).

    A delivery not acked within `lease_seconds` is redelivered; an entry that would be
    delivered more than `max_deliveries` times goes to the queue's dead letters instead.
    `clock` measures leases (seconds); receive timeouts follow the event loop's clock.
    """

    def __init__(
        self,
        *,
        lease_seconds: float = 300.0,
        max_deliveries: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self._lease_seconds = lease_seconds
        self._max_deliveries = max_deliveries
        self._clock = clock
        self._queues: dict[str, _WorkQueue] = {}
        self._topics = LocalTopics()
        self._closed = False
        self._enqueued: OrderedDict[str, None] = OrderedDict()

    async def enqueue(
        self,
        queue: str,
        envelope: BusPayload,
        *,
        dedupe_id: str | None = None,
    ) -> str | None:
        """Append to a work queue and wake its waiting receivers; returns the entry id.

        None when `dedupe_id` was enqueued before (the last `_DEDUPE_MEMORY` ids are kept).
        """
        data = self._encode(envelope)
        if dedupe_id is not None:
            if dedupe_id in self._enqueued:
                return None
            self._enqueued[dedupe_id] = None
            while len(self._enqueued) > _DEDUPE_MEMORY:
                self._enqueued.popitem(last=False)
        work = self._queue(queue)
        async with work.changed:
            entry_id = work.append(data)
            work.changed.notify_all()
        return entry_id

    async def receive(
        self, queue: str, *, consumer: str, timeout: float | None = None
    ) -> Delivery | None:
        """The next entry, waiting up to `timeout` seconds (0: not at all; None: forever).

        Returns `None` on timeout or when the bus closes during the wait; raises `BusError`
        when called on a closed bus (so a polling loop cannot spin on it).
        """
        if self._closed:
            raise BusError("the bus is closed")
        work = self._queue(queue)
        loop = asyncio.get_running_loop()
        give_up_at = None if timeout is None else loop.time() + max(timeout, 0.0)
        async with work.changed:
            while not self._closed:
                entry = work.take(self._clock(), consumer)
                if entry is not None:
                    return _MemoryDelivery(work, entry)
                now = loop.time()
                if give_up_at is not None and give_up_at <= now:
                    return None
                delay = self._wait_time(work, None if give_up_at is None else give_up_at - now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await work.changed.wait()
        return None

    async def publish(self, topic: str, envelope: BusPayload) -> None:
        """Hand the envelope to every current subscriber of `topic`."""
        self._topics.publish(topic, self._encode(envelope))

    async def subscribe(self, topic: str) -> Subscription:
        """A subscription to envelopes published on `topic` from now on."""
        if self._closed:
            raise BusError("the bus is closed")
        return self._topics.subscribe(topic)

    async def dead_letters(self, queue: str) -> list[BusPayload]:
        """Entries given up on after `max_deliveries` unacked deliveries, oldest first."""
        return [
            entry.envelope
            for entry in await self.dead_letter_entries(queue)
            if entry.envelope is not None
        ]

    async def dead_letter_entries(self, queue: str) -> list[DeadLetter]:
        """The queue's dead letters with their ids, oldest first."""
        work = self._queue(queue)
        async with work.changed:
            if work.expire_leases(self._clock()):
                work.changed.notify_all()
            dead = work.dead_letters()
        return [DeadLetter(i, queue, decode(data), deliveries) for i, data, deliveries in dead]

    async def drop_dead_letter(self, queue: str, entry_id: str) -> bool:
        """Remove one dead letter; False if the queue has none with that id."""
        return self._queue(queue).drop_dead(entry_id)

    async def queue_stats(self, queue: str) -> QueueStats:
        """Entries neither acked nor dead, the oldest one's age, and the dead letters."""
        work = self._queues.get(queue)
        if work is None:
            return QueueStats(depth=0, oldest_seconds=0.0, dead=0)
        return work.stats()

    async def close(self) -> None:
        """Wake every pending receive (they return `None`) and end every subscription."""
        if self._closed:
            return
        self._closed = True
        for work in tuple(self._queues.values()):
            async with work.changed:
                work.changed.notify_all()
        self._topics.close()

    def _queue(self, name: str) -> _WorkQueue:
        work = self._queues.get(name)
        if work is None:
            work = _WorkQueue(
                name, lease_seconds=self._lease_seconds, max_deliveries=self._max_deliveries
            )
            self._queues[name] = work
        return work

    def _encode(self, envelope: BusPayload) -> bytes:
        if self._closed:
            raise BusError("the bus is closed")
        try:
            return encode(envelope)
        except (TypeError, ValueError, OverflowError) as exc:
            raise BusError(f"cannot encode {type(envelope).__name__} for the bus: {exc}") from exc

    def _wait_time(self, work: _WorkQueue, remaining: float | None) -> float | None:
        """How long to sleep: until the receive gives up or the next lease runs out."""
        expires_at = work.next_expiry()
        if expires_at is None:
            return remaining
        until_expiry = max(expires_at - self._clock(), 0.0)
        return until_expiry if remaining is None else min(remaining, until_expiry)
