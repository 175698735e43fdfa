"""Topics of `SqliteBus` that other processes on the same data file can subscribe to.

The embedded deployment's topics live in one process's memory, so `switchboard events` in
another terminal could never see them. A topic named as shared (the `notifications` fan-out)
is written to a table of the data file instead: publishing is an INSERT, a subscription reads
the rows after the newest one there was when it subscribed, woken at once by publishers in
its own process and otherwise looking every `_POLL_SECONDS`. Still at-most-once: nothing
published before a subscription started reaches it, and rows go after `_KEEP_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from core.bus.base import BusPayload, Subscription
from core.envelopes import decode

if TYPE_CHECKING:
    from core.backends.sql.bus import SqliteQueueFile

__all__ = ["TOPIC_SCHEMA", "SharedTopics"]

_POLL_SECONDS: Final = 0.5
_KEEP_SECONDS: Final = 3_600.0
_PRUNE_EVERY: Final = 100

TOPIC_SCHEMA: Final = (
    """
    CREATE TABLE IF NOT EXISTS bus_topic_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        topic TEXT NOT NULL,
        data BLOB NOT NULL,
        at REAL NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS bus_topic_log_by_topic ON bus_topic_log (topic, seq)",
)


class SharedTopics:
    """The shared topics of one `SqliteBus` (its queue file and clock)."""

    def __init__(self, file: SqliteQueueFile, clock: Callable[[], float]) -> None:
        self._file = file
        self._clock = clock
        self._published = 0
        self._changed: dict[str, asyncio.Event] = {}
        self._subscriptions: set[_SharedSubscription] = set()

    async def publish(self, topic: str, data: bytes) -> None:
        """Append to the topic's rows and wake this process's subscribers."""
        now = self._clock()
        async with self._file.write(f"publish on {topic}") as db:
            await db.execute(
                "INSERT INTO bus_topic_log (topic, data, at) VALUES (?, ?, ?)", (topic, data, now)
            )
            self._published += 1
            if self._published % _PRUNE_EVERY == 1:
                await db.execute("DELETE FROM bus_topic_log WHERE at < ?", (now - _KEEP_SECONDS,))
        self._event(topic).set()

    async def subscribe(self, topic: str) -> Subscription:
        """A subscription to rows published on `topic` from now on (by any process)."""
        async with self._file.write(f"subscribe to {topic}") as db:
            rows = await db.execute_fetchall("SELECT coalesce(max(seq), 0) FROM bus_topic_log")
        start = int(next(iter(rows))[0])
        subscription = _SharedSubscription(self, topic, start)
        self._subscriptions.add(subscription)
        return subscription

    async def read_after(self, topic: str, seq: int) -> list[tuple[int, bytes]]:
        """The topic's rows after `seq`, oldest first."""
        async with self._file.write(f"read {topic}") as db:
            rows = await db.execute_fetchall(
                "SELECT seq, data FROM bus_topic_log WHERE topic = ? AND seq > ? ORDER BY seq",
                (topic, seq),
            )
        return [(int(row[0]), bytes(row[1])) for row in rows]

    async def wait(self, topic: str) -> None:
        """Until a publisher of this process wakes the topic, or the poll interval passed."""
        event = self._event(topic)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_POLL_SECONDS):
                await event.wait()

    def leave(self, subscription: _SharedSubscription) -> None:
        self._subscriptions.discard(subscription)
        self._event(subscription.topic).set()

    def close(self) -> None:
        """End every subscription (the bus is closing)."""
        for subscription in tuple(self._subscriptions):
            subscription.end()

    def _event(self, topic: str) -> asyncio.Event:
        """The topic's wake-up; replaced each time it fires, so every waiter sees one."""
        event = self._changed.get(topic)
        if event is None or event.is_set():
            if event is not None:
                event.set()
            event = self._changed[topic] = asyncio.Event()
        return event


class _SharedSubscription(Subscription):
    def __init__(self, topics: SharedTopics, topic: str, start: int) -> None:
        self._topics = topics
        self.topic = topic
        self._seq = start
        self._pending: deque[bytes] = deque()
        self._ended = False

    def __aiter__(self) -> _SharedSubscription:
        return self

    async def __anext__(self) -> BusPayload:
        while not self._pending:
            if self._ended:
                raise StopAsyncIteration
            rows = await self._topics.read_after(self.topic, self._seq)
            if rows:
                self._seq = rows[-1][0]
                self._pending.extend(data for _, data in rows)
            else:
                await self._topics.wait(self.topic)
        return decode(self._pending.popleft())

    async def aclose(self) -> None:
        """Stop receiving."""
        self.end()

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._topics.leave(self)
