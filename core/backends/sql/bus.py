"""`SqliteBus`: the embedded deployment's durable `Bus`, work queues in the SQLite data file.

Work queues are rows of one table, so an entry enqueued survives a crash or a restart until it
is acked: enqueue is an INSERT (committed before it returns), receive leases the oldest entry
nobody holds (redeliveries first), ack is a DELETE, nack releases the lease. Leases follow the
wall clock, so they outlive the process; `take_over=True` releases every lease at open, for the
one process that owns the queues (`switchboard serve`), since whoever held them is gone.
Dedupe ids are rows too, kept a day. Topics are at-most-once by contract and stay in memory
(`core.backends.sql.local_topics`): nobody can miss an event they were not subscribed for.

One connection of its own (WAL lets it share the file with the store), called in line on the
loop's thread (`core/backends/sql/_inline_file.py`); an `asyncio.Lock` keeps each
transaction's statements together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from core.backends.sql._bus_topics import TOPIC_SCHEMA, SharedTopics
from core.backends.sql._inline_file import InlineFile
from core.backends.sql.local_topics import LocalTopics
from core.bus.base import Bus, BusPayload, DeadLetter, Delivery, Subscription
from core.bus.stats import QueueStats, enqueued_at
from core.clock import utc_now
from core.envelopes import decode, encode
from core.errors import BusError, BusUnavailable
from core.sqlite_file import disk_full

__all__ = ["SqliteBus", "SqliteQueueFile"]

logger = logging.getLogger(__name__)

# How long a dedupe id is remembered, and how often old ones are swept away.
_DEDUPE_SECONDS: Final = 86_400.0
_PRUNE_EVERY: Final = 1_000
# A waiting receive looks at the table at least this often (another connection may write).
_POLL_SECONDS: Final = 1.0

_SCHEMA: Final = (
    """
    CREATE TABLE IF NOT EXISTS bus_entries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        queue TEXT NOT NULL,
        data BLOB NOT NULL,
        deliveries INTEGER NOT NULL DEFAULT 0,
        leased_until REAL,
        consumer TEXT NOT NULL DEFAULT '',
        retry INTEGER NOT NULL DEFAULT 0,
        dead INTEGER NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX IF NOT EXISTS bus_entries_by_queue ON bus_entries (queue, dead, retry, seq)",
    "CREATE TABLE IF NOT EXISTS bus_dedupe (id TEXT PRIMARY KEY, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS bus_dedupe_by_age ON bus_dedupe (at)",
    *TOPIC_SCHEMA,
)


class SqliteQueueFile:
    """One connection to the data file for queue tables, with transactions that raise `BusError`.

    Shared by `SqliteBus` and `core.backends.sql.mailboxes.SqliteMailboxes`.
    """

    def __init__(self, db: InlineFile) -> None:
        self._db = db
        self._lock = asyncio.Lock()
        self.closed = False

    @classmethod
    async def open(cls, path: Path | str, schema: tuple[str, ...]) -> SqliteQueueFile:
        """Open the file (creating it and its directory) and create `schema`'s tables."""
        target = str(path)
        try:
            db = await InlineFile.open(target)
        except (OSError, sqlite3.Error) as exc:
            raise BusError(f"cannot open the queues at {target}: {exc}") from exc
        try:
            await db.begin()
            for statement in schema:
                await db.execute(statement)
            await db.commit()
        except BaseException as exc:
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise BusError(f"cannot prepare the queues at {target}: {exc}") from exc
            raise
        return cls(db)

    @asynccontextmanager
    async def write(self, action: str) -> AsyncIterator[InlineFile]:
        """One write transaction, committed before the block's caller goes on."""
        async with self._lock:
            if self.closed:
                raise BusError("the bus is closed")
            try:
                try:
                    # Inside the `try`: a BEGIN cancelled while it waited for the lock in a
                    # thread is waited for (it may have begun), and the rollback undoes it.
                    await self._db.begin()
                    yield self._db
                    await self._db.commit()
                except BaseException:
                    await self._db.rollback()
                    raise
            except sqlite3.Error as exc:
                if disk_full(exc):
                    raise BusUnavailable(
                        f"the queues could not {action}: the disk is full ({exc})"
                    ) from exc
                raise BusError(f"the queues could not {action}: {exc}") from exc

    @asynccontextmanager
    async def read(self, action: str) -> AsyncIterator[InlineFile]:
        """Statements that only read, each on a snapshot of its own: no transaction, so no
        write lock held and no BEGIN and COMMIT."""
        async with self._lock:
            if self.closed:
                raise BusError("the bus is closed")
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise BusError(f"the queues could not {action}: {exc}") from exc

    async def close(self) -> None:
        """Close the connection; later transactions raise `BusError`."""
        if self.closed:
            return
        self.closed = True
        async with self._lock:
            with contextlib.suppress(sqlite3.Error):
                await self._db.close()


class _SqliteDelivery(Delivery):
    """One lease on a queue row; `deliveries` is the lease's token."""

    __slots__ = ("_bus", "_deliveries", "_envelope", "_queue", "_seq")

    def __init__(
        self, bus: SqliteBus, queue: str, seq: int, deliveries: int, envelope: BusPayload
    ) -> None:
        self._bus = bus
        self._queue = queue
        self._seq = seq
        self._deliveries = deliveries
        self._envelope = envelope

    @property
    def id(self) -> str:
        """The entry id, the same on every delivery of the entry."""
        return f"{self._seq}-0"

    @property
    def envelope(self) -> BusPayload:
        """The payload, decoded afresh for this delivery."""
        return self._envelope

    @property
    def attempt(self) -> int:
        """1 on first delivery, 2 on the first redelivery, and so on."""
        return self._deliveries

    async def ack(self) -> None:
        """Done; a no-op when repeated or when the lease already passed to someone else."""
        async with self._bus.file.write("ack an entry") as db:
            await db.execute(
                "DELETE FROM bus_entries WHERE seq = ? AND deliveries = ? AND dead = 0",
                (self._seq, self._deliveries),
            )

    async def nack(self) -> None:
        """Give the entry back for redelivery now; a no-op if this lease is no longer held."""
        async with self._bus.file.write("release an entry") as db:
            released = await self._bus.release(db, self._seq, self._deliveries)
        if released:
            await self._bus.wake(self._queue)


class SqliteBus(Bus):
    """Durable work queues in a SQLite file, in-memory topics (the embedded deployment).

    A delivery not acked within `lease_seconds` is redelivered; an entry that would be
    delivered more than `max_deliveries` times goes to the queue's dead letters instead.
    `clock` is the wall clock in seconds (leases outlive the process).
    """

    def __init__(
        self,
        file: SqliteQueueFile,
        *,
        lease_seconds: float,
        max_deliveries: int,
        clock: Callable[[], float],
        shared_topics: frozenset[str] = frozenset(),
    ) -> None:
        """Wrap an open queue file; use `SqliteBus.open` instead."""
        self.file = file
        self._shared_topics = shared_topics
        self._shared = SharedTopics(file, clock)
        self._lease_seconds = lease_seconds
        self._max_deliveries = max_deliveries
        self._clock = clock
        self._topics = LocalTopics()
        self._changed: dict[str, asyncio.Condition] = {}
        self._closed = False
        self._dedupes = 0

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        lease_seconds: float = 300.0,
        max_deliveries: int = 5,
        take_over: bool = False,
        clock: Callable[[], float] = time.time,
        shared_topics: frozenset[str] = frozenset(),
    ) -> SqliteBus:
        """Open the queues in the SQLite file at `path`.

        `take_over`: this process is the only consumer of these queues, so leases still held
        were held by a process that died; they are released now (each counts as a delivery).
        `shared_topics`: topics other processes on the file can subscribe to
        (`core/backends/sql/_bus_topics.py`); the others stay in this process's memory.
        """
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        file = await SqliteQueueFile.open(path, _SCHEMA)
        bus = cls(
            file,
            lease_seconds=lease_seconds,
            max_deliveries=max_deliveries,
            clock=clock,
            shared_topics=shared_topics,
        )
        try:
            async with file.write("prepare the queues") as db:
                await db.execute(
                    "DELETE FROM bus_dedupe WHERE at < ?", (clock() - _DEDUPE_SECONDS,)
                )
                if take_over:
                    await bus._release_all(db)
        except BaseException:
            await file.close()
            raise
        return bus

    async def enqueue(
        self,
        queue: str,
        envelope: BusPayload,
        *,
        dedupe_id: str | None = None,
    ) -> str | None:
        """Append to a work queue (committed on return) and wake its receivers; the entry id.

        None when `dedupe_id` was enqueued before (within a day).
        """
        data = self._encode(envelope)
        now = self._clock()
        async with self.file.write("enqueue") as db:
            if dedupe_id is not None:
                cursor = await db.execute(
                    "INSERT OR IGNORE INTO bus_dedupe (id, at) VALUES (?, ?)", (dedupe_id, now)
                )
                if cursor.rowcount == 0:
                    return None
                self._dedupes += 1
                if self._dedupes % _PRUNE_EVERY == 0:
                    await db.execute(
                        "DELETE FROM bus_dedupe WHERE at < ?", (now - _DEDUPE_SECONDS,)
                    )
            cursor = await db.execute(
                "INSERT INTO bus_entries (queue, data) VALUES (?, ?)", (queue, data)
            )
            seq = cursor.lastrowid
        await self.wake(queue)
        return f"{seq}-0"

    async def receive(
        self, queue: str, *, consumer: str, timeout: float | None = None
    ) -> Delivery | None:
        """The next entry, waiting up to `timeout` seconds (0: not at all; None: forever).

        Returns `None` on timeout or when the bus closes during the wait; raises `BusError`
        when called on a closed bus.
        """
        if self._closed:
            raise BusError("the bus is closed")
        changed = self._condition(queue)
        loop = asyncio.get_running_loop()
        give_up_at = None if timeout is None else loop.time() + max(timeout, 0.0)
        async with changed:
            while not self._closed:
                try:
                    delivery, next_expiry = await self._take(queue, consumer)
                except BusError:
                    if self._closed:
                        return None  # closed while this receive waited for the file
                    raise
                if delivery is not None:
                    return delivery
                now = loop.time()
                if give_up_at is not None and give_up_at <= now:
                    return None
                delay = _POLL_SECONDS
                if next_expiry is not None:
                    delay = min(delay, max(next_expiry - self._clock(), 0.0))
                if give_up_at is not None:
                    delay = min(delay, give_up_at - now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await changed.wait()
        return None

    async def publish(self, topic: str, envelope: BusPayload) -> None:
        """Hand the envelope to every current subscriber of `topic` (in this process, or on
        the file for a shared topic)."""
        if topic in self._shared_topics:
            await self._shared.publish(topic, self._encode(envelope))
            return
        self._topics.publish(topic, self._encode(envelope))

    async def subscribe(self, topic: str) -> Subscription:
        """A subscription to envelopes published on `topic` from now on."""
        if self._closed:
            raise BusError("the bus is closed")
        if topic in self._shared_topics:
            return await self._shared.subscribe(topic)
        return self._topics.subscribe(topic)

    async def dead_letters(self, queue: str) -> list[BusPayload]:
        """Entries given up on after `max_deliveries` unacked deliveries, oldest first."""
        return [
            entry.envelope
            for entry in await self.dead_letter_entries(queue)
            if entry.envelope is not None
        ]

    async def dead_letter_entries(self, queue: str) -> list[DeadLetter]:
        """The queue's dead letters with their ids (`<seq>-0`), oldest first."""
        async with self.file.write("read dead letters") as db:
            await self._expire(db, queue)
            rows = await db.execute_fetchall(
                "SELECT seq, data, deliveries FROM bus_entries"
                " WHERE queue = ? AND dead = 1 ORDER BY seq",
                (queue,),
            )
        return [
            DeadLetter(f"{seq}-0", queue, decode(bytes(data)), int(deliveries))
            for seq, data, deliveries in rows
        ]

    async def drop_dead_letter(self, queue: str, entry_id: str) -> bool:
        """Remove one dead letter; False if the queue has none with that id."""
        seq, _, rest = entry_id.partition("-")
        if not seq.isdigit() or rest != "0":
            return False
        async with self.file.write("drop a dead letter") as db:
            cursor = await db.execute(
                "DELETE FROM bus_entries WHERE seq = ? AND queue = ? AND dead = 1",
                (int(seq), queue),
            )
            return cursor.rowcount == 1

    async def queue_stats(self, queue: str) -> QueueStats:
        """Entries neither acked nor dead, the oldest one's age, and the dead letters."""
        async with self.file.write("read queue sizes") as db:
            rows = await db.execute_fetchall(
                "SELECT dead, count(*), min(seq) FROM bus_entries WHERE queue = ? GROUP BY dead",
                (queue,),
            )
            counts = {int(row[0]): (int(row[1]), row[2]) for row in rows}
            depth, oldest_seq = counts.get(0, (0, None))
            oldest = None
            if oldest_seq is not None:
                found = list(
                    await db.execute_fetchall(
                        "SELECT data FROM bus_entries WHERE seq = ?", (oldest_seq,)
                    )
                )
                oldest = bytes(found[0][0]) if found else None
        age = 0.0
        if oldest is not None:
            with contextlib.suppress(BusError):
                age = max((utc_now() - enqueued_at(decode(oldest))).total_seconds(), 0.0)
        return QueueStats(depth=depth, oldest_seconds=age, dead=counts.get(1, (0, None))[0])

    async def close(self) -> None:
        """Wake every pending receive (they return `None`), end subscriptions, close the file."""
        if self._closed:
            return
        self._closed = True
        self._shared.close()
        self._topics.close()
        for changed in tuple(self._changed.values()):
            async with changed:
                changed.notify_all()
        await self.file.close()

    async def wake(self, queue: str) -> None:
        """Tell this process's receivers on `queue` that an entry may be available."""
        changed = self._condition(queue)
        async with changed:
            changed.notify_all()

    async def release(self, db: InlineFile, seq: int, deliveries: int) -> bool:
        """Release a held lease (inside a transaction); False if that lease is not held."""
        rows = await db.execute_fetchall(
            "SELECT queue, consumer FROM bus_entries"
            " WHERE seq = ? AND deliveries = ? AND dead = 0 AND leased_until IS NOT NULL",
            (seq, deliveries),
        )
        found = next(iter(rows), None)
        if found is None:
            return False
        await self._release_row(db, seq, deliveries, str(found[0]), str(found[1]))
        return True

    async def _take(self, queue: str, consumer: str) -> tuple[_SqliteDelivery | None, float | None]:
        """Lease the next entry (redeliveries first); else when the earliest lease runs out."""
        now = self._clock()
        async with self.file.write("receive") as db:
            await self._expire(db, queue)
            rows = await db.execute_fetchall(
                "SELECT seq, data, deliveries FROM bus_entries"
                " WHERE queue = ? AND dead = 0 AND leased_until IS NULL"
                " ORDER BY retry DESC, seq LIMIT 1",
                (queue,),
            )
            found = next(iter(rows), None)
            if found is None:
                expiry = await db.execute_fetchall(
                    "SELECT min(leased_until) FROM bus_entries WHERE queue = ? AND dead = 0",
                    (queue,),
                )
                first = next(iter(expiry), None)
                return None, None if first is None or first[0] is None else float(first[0])
            seq, data, deliveries = int(found[0]), bytes(found[1]), int(found[2]) + 1
            await db.execute(
                "UPDATE bus_entries SET deliveries = ?, leased_until = ?, consumer = ?"
                " WHERE seq = ?",
                (deliveries, now + self._lease_seconds, consumer, seq),
            )
        return _SqliteDelivery(self, queue, seq, deliveries, decode(data)), None

    async def _expire(self, db: InlineFile, queue: str) -> None:
        rows = await db.execute_fetchall(
            "SELECT seq, deliveries, consumer FROM bus_entries"
            " WHERE queue = ? AND dead = 0 AND leased_until <= ?",
            (queue, self._clock()),
        )
        for seq, deliveries, consumer in rows:
            await self._release_row(db, int(seq), int(deliveries), queue, str(consumer))

    async def _release_all(self, db: InlineFile) -> None:
        rows = list(
            await db.execute_fetchall(
                "SELECT seq, deliveries, queue, consumer FROM bus_entries"
                " WHERE dead = 0 AND leased_until IS NOT NULL"
            )
        )
        for seq, deliveries, queue, consumer in rows:
            await self._release_row(db, int(seq), int(deliveries), str(queue), str(consumer))
        if rows:
            logger.info("took over %d unacked bus entries left by the last run", len(rows))

    async def _release_row(
        self, db: InlineFile, seq: int, deliveries: int, queue: str, consumer: str
    ) -> None:
        if deliveries < self._max_deliveries:
            await db.execute(
                "UPDATE bus_entries SET leased_until = NULL, retry = 1 WHERE seq = ?", (seq,)
            )
            return
        # Its next delivery would exceed the limit: park it where an operator can look.
        await db.execute(
            "UPDATE bus_entries SET leased_until = NULL, dead = 1 WHERE seq = ?", (seq,)
        )
        logger.warning(
            "bus entry %s-0 on queue %s dead-lettered after %d deliveries (last consumer %s)",
            seq,
            queue,
            deliveries,
            consumer,
        )

    def _condition(self, queue: str) -> asyncio.Condition:
        changed = self._changed.get(queue)
        if changed is None:
            changed = self._changed[queue] = asyncio.Condition()
        return changed

    def _encode(self, envelope: BusPayload) -> bytes:
        if self._closed:
            raise BusError("the bus is closed")
        try:
            return encode(envelope)
        except (TypeError, ValueError, OverflowError) as exc:
            raise BusError(f"cannot encode {type(envelope).__name__} for the bus: {exc}") from exc
