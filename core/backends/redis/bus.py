"""`RedisBus`: the distributed `Bus`, shared by every process that reaches the same Redis.

Work queues are Redis Streams read through one consumer group each: `XREADGROUP` hands a new
entry to one consumer, `XAUTOCLAIM` hands an entry whose lease ran out to the next consumer
that asks, and the pending-entries list keeps the delivery count (`attempt`). Entries are
deleted once acked, so a queue stream holds only work not yet done (and `MAXLEN ~` bounds it).
Topics are pub/sub channels: at-most-once, only to subscribers connected at the time.

Each step that reads and changes a pending entry is one Lua script, so it is atomic: claiming
(and dead-lettering entries past `max_deliveries`), and the fenced ack/nack, which only act
while the entry is still held by the same consumer with the same delivery count. Every script
touches one queue's keys only (its stream, dead letters and dedupe marks, which share the
queue's hash tag, core/backends/redis/keys.py), so each runs within one Redis Cluster slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError, ResponseError

from core.backends.redis._bus_topics import RedisSubscription, bus_error
from core.backends.redis.client import AnyRedis, connect_redis
from core.backends.redis.keys import CONSUMER_GROUP, RedisKeys
from core.bus.base import Bus, BusPayload, DeadLetter, Delivery, Subscription
from core.bus.stats import QueueStats
from core.envelopes import decode, encode
from core.errors import BusError

__all__ = ["RedisBus"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# The longest a blocked receive waits on Redis before looking for expired leases again (and
# the upper bound on how late it notices a lease that ran out).
_MAX_RECHECK_SECONDS = 1.0
# Pending entries `dead_letters` inspects for leases that ran out on their last delivery.
_SWEEP_BATCH = 1000
# How long `close` lets commands in flight finish before it closes the connections anyway.
_CLOSE_GRACE_SECONDS = 2.0

# Shared by the scripts below. `bury` moves a pending entry to the dead letters.
_LUA_PRELUDE = """
local function field(fields, name)
  if not fields then return false end
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return false
end

local function bury(stream, dlq, group, maxlen, id, data, reason, deliveries)
  redis.call('XADD', dlq, 'MAXLEN', '~', maxlen, '*',
    'data', data or '', 'reason', reason, 'id', id, 'deliveries', deliveries)
  redis.call('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
end
"""

# KEYS: stream, dead letters. ARGV: group, consumer, lease ms, max deliveries, maxlen.
# Returns {dead, id, data, deliveries} or {dead}; dead is {id, deliveries, ...} of the entries
# given up on. Expired leases come before new entries; the whole pending list is scanned.
_TAKE = (
    _LUA_PRELUDE
    + """
local stream, dlq, group, consumer = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local max_deliveries = tonumber(ARGV[4])
local dead = {}
local cursor = '0-0'
repeat
  local claimed = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[3], cursor, 'COUNT', 1)
  cursor = claimed[1]
  local entry = claimed[2][1]
  if entry then
    local id, data = entry[1], field(entry[2], 'data')
    local deliveries = redis.call('XPENDING', stream, group, id, id, 1)[1][4]
    if deliveries <= max_deliveries then
      return {dead, id, data, deliveries}
    end
    -- This claim was not a delivery: the entry was handed out `deliveries - 1` times.
    bury(stream, dlq, group, ARGV[5], id, data, 'max_deliveries', deliveries - 1)
    dead[#dead + 1] = id
    dead[#dead + 1] = deliveries - 1
  end
until cursor == '0-0'
local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, '>')
if read then
  local entry = read[1][2][1]
  return {dead, entry[1], field(entry[2], 'data'), 1}
end
return {dead}
"""
)

# KEYS: stream, dead letters. ARGV: group, id, consumer, deliveries, action (ack, nack or
# bury), lease ms, maxlen, reason, data. Acts only if the entry is still pending for that
# consumer with that delivery count (the fence against stale deliveries); 1 if it acted.
_SETTLE = (
    _LUA_PRELUDE
    + """
local stream, dlq, group, id = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local pending = redis.call('XPENDING', stream, group, id, id, 1)[1]
if not pending or pending[2] ~= ARGV[3] or pending[4] ~= tonumber(ARGV[4]) then
  return 0
end
if ARGV[5] == 'nack' then
  -- Idle for a whole lease: the next XAUTOCLAIM takes it (JUSTID: not counted twice).
  redis.call('XCLAIM', stream, group, ARGV[3], 0, id, 'IDLE', ARGV[6], 'JUSTID')
elseif ARGV[5] == 'bury' then
  bury(stream, dlq, group, ARGV[7], id, ARGV[9], ARGV[8], pending[4])
else
  redis.call('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
end
return 1
"""
)

# KEYS: stream, dead letters. ARGV: group, lease ms, max deliveries, maxlen, batch.
# Dead-letters entries whose last allowed lease ran out; returns {id, deliveries, ...}.
_SWEEP = (
    _LUA_PRELUDE
    + """
local stream, dlq, group = KEYS[1], KEYS[2], ARGV[1]
local dead = {}
for _, p in ipairs(redis.call('XPENDING', stream, group, 'IDLE', ARGV[2], '-', '+', ARGV[5])) do
  if p[4] >= tonumber(ARGV[3]) then
    local entry = redis.call('XRANGE', stream, p[1], p[1])[1]
    bury(stream, dlq, group, ARGV[4], p[1], entry and field(entry[2], 'data'), 'max_deliveries',
      p[4])
    dead[#dead + 1] = p[1]
    dead[#dead + 1] = p[4]
  end
end
return dead
"""
)

_Settlement = Literal["ack", "nack", "bury"]


def _decodes(client: AnyRedis) -> bool:
    """Whether `client` decodes replies to text (the bus's payloads are msgpack bytes)."""
    if isinstance(client, RedisCluster):
        return bool(client.get_connection_kwargs().get("decode_responses"))
    return bool(client.connection_pool.connection_kwargs.get("decode_responses"))


class _InFlight:
    """A bus's commands in flight: `close` waits for none to be left, so none reconnects a
    closed client."""

    __slots__ = ("count", "idle")

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()


class _Command:
    """`RedisBus._command`: a class rather than a generator, as it wraps every command the
    bus sends (a generator-based context manager costs several times as much)."""

    __slots__ = ("_action", "_flights")

    def __init__(self, flights: _InFlight, action: str) -> None:
        self._flights = flights
        self._action = action

    def __enter__(self) -> None:
        flights = self._flights
        flights.count += 1
        flights.idle.clear()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        flights = self._flights
        flights.count -= 1
        if not flights.count:
            flights.idle.set()
        if isinstance(exc, RedisError):
            raise bus_error(self._action, exc) from exc


def _group_is_gone(exc: ResponseError) -> bool:
    """Whether Redis lost the stream or its group (a restart without persistence, a flush)."""
    message = str(exc)
    return message.startswith(("NOGROUP", "UNBLOCKED"))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _first_read_entry(reply: Any) -> tuple[str, bytes | None] | None:
    """The entry of an `XREADGROUP ... COUNT 1` reply, in either shape redis-py parses it to.

    RESP2-style parsing gives `[[stream, [(id, fields)]]]`; RESP3-style gives
    `{stream: [[(id, fields)]]}`.
    """
    if not reply:
        return None
    if isinstance(reply, dict):
        batches = [batch for value in reply.values() for batch in value]
    else:
        batches = [value for _, value in reply]
    for entries in batches:
        for entry_id, fields in entries:
            data = fields.get(b"data") if isinstance(fields, dict) else None
            return _text(entry_id), data
    return None


# `RedisBus._settle` as a delivery calls it: queue, entry id, consumer, attempt, action.
_Settle = Callable[[str, str, str, int, "_Settlement"], Awaitable[None]]


class _RedisDelivery(Delivery):
    """One delivery of a stream entry; its ack and nack are fenced by consumer and count.

    Settling it after the bus closed raises `BusError`; the entry comes back after its lease.
    """

    __slots__ = ("_attempt", "_consumer", "_envelope", "_id", "_queue", "_settle")

    def __init__(
        self,
        settle: _Settle,
        queue: str,
        consumer: str,
        entry_id: str,
        attempt: int,
        envelope: BusPayload,
    ) -> None:
        self._settle = settle
        self._queue = queue
        self._consumer = consumer
        self._id = entry_id
        self._attempt = attempt
        self._envelope = envelope

    @property
    def id(self) -> str:
        """The stream entry id, the same on every delivery of the entry."""
        return self._id

    @property
    def envelope(self) -> BusPayload:
        """The payload, decoded for this delivery."""
        return self._envelope

    @property
    def attempt(self) -> int:
        """The entry's delivery count in the consumer group (1 on first delivery)."""
        return self._attempt

    async def ack(self) -> None:
        """Done: acknowledge and delete the entry; a no-op if this delivery is stale."""
        await self._settle(self._queue, self._id, self._consumer, self._attempt, "ack")

    async def nack(self) -> None:
        """Make the entry claimable at once; a no-op if this delivery is stale."""
        await self._settle(self._queue, self._id, self._consumer, self._attempt, "nack")


# KEYS: stream, dedupe marker; ARGV: maxlen, data, marker lifetime (s).
# Returns the new entry id, or nil when the marker existed (the envelope was enqueued before).
_ENQUEUE_ONCE = """
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then return false end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'data', ARGV[2])
"""
_DEDUPE_SECONDS = 86_400


class RedisBus(Bus):
    """Work queues on Redis Streams and topics on Redis pub/sub (the distributed deployment).

    A delivery not acked within `lease_seconds` is handed to the next consumer that asks; an
    entry that would be delivered more than `max_deliveries` times goes to the queue's dead
    letters instead. Queue streams are trimmed to about `maxlen` entries. Pass `client` to
    share a connection pool (the bus then leaves closing it to you); it must not decode
    responses.
    """

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float = 300.0,
        max_deliveries: int = 5,
        maxlen: int = 100_000,
        client: AnyRedis | None = None,
        keys: RedisKeys | None = None,
    ) -> None:
        """A bus on the Redis at `url` (or `client`), its streams and channels in the namespace
        of `keys` (the default bot's when None)."""
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        if client is not None and _decodes(client):
            raise ValueError("the Redis client must not decode responses (payloads are msgpack)")
        self._keys = keys or RedisKeys()
        self._lease_ms = max(1, math.ceil(lease_seconds * 1000))
        self._max_deliveries = max_deliveries
        self._maxlen = maxlen
        self._recheck_seconds = min(_MAX_RECHECK_SECONDS, lease_seconds / 2)
        self._owns_client = client is None
        self._client: AnyRedis = client or connect_redis(
            url,
            decode_responses=False,
            # A few quick retries ride out a dropped connection; a server that stays down
            # surfaces as BusError fast, and the caller backs off.
            retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.2), retries=2),
        )
        self._take_script = self._client.register_script(_TAKE)
        self._settle_script = self._client.register_script(_SETTLE)
        self._sweep_script = self._client.register_script(_SWEEP)
        self._enqueue_once_script = self._client.register_script(_ENQUEUE_ONCE)
        # Streams whose consumer group this bus has made sure of.
        self._groups: set[str] = set()
        # Queues (and consumers) whose last receive waited for new work in vain.
        self._waited_in_vain: set[tuple[str, str]] = set()
        # Blocking reads in flight, cancelled by `close`.
        self._reads: set[asyncio.Task[Any]] = set()
        self._subscriptions: set[RedisSubscription] = set()
        self._in_flight = _InFlight()
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        lease_seconds: float = 300.0,
        max_deliveries: int = 5,
        maxlen: int = 100_000,
        client: AnyRedis | None = None,
        keys: RedisKeys | None = None,
    ) -> RedisBus:
        """A bus whose Redis answered a PING; `BusError` if it is unreachable."""
        bus = cls(
            url,
            lease_seconds=lease_seconds,
            max_deliveries=max_deliveries,
            maxlen=maxlen,
            client=client,
            keys=keys,
        )
        try:
            with bus._command("connect"):
                await bus._client.ping()
        except BusError:
            await bus.close()
            raise
        return bus

    async def enqueue(
        self,
        queue: str,
        envelope: BusPayload,
        *,
        dedupe_id: str | None = None,
    ) -> str | None:
        """`XADD` to the queue's stream (trimmed to about `maxlen`); returns the entry id.

        With `dedupe_id` the add and a day-long marker of the id are one script: None when the
        marker already existed.
        """
        data = self._encode(envelope)
        with self._command(f"enqueue on {queue}"):
            if dedupe_id is None:
                entry_id = await self._client.xadd(
                    self._keys.queue_stream(queue),
                    {"data": data},
                    maxlen=self._maxlen,
                    approximate=True,
                )
            else:
                entry_id = await self._enqueue_once_script(
                    keys=[self._keys.queue_stream(queue), self._keys.enqueued(queue, dedupe_id)],
                    args=[self._maxlen, data, _DEDUPE_SECONDS],
                )
                if entry_id is None:
                    return None
        return _text(entry_id)

    async def receive(
        self, queue: str, *, consumer: str, timeout: float | None = None
    ) -> Delivery | None:
        """The next entry, waiting up to `timeout` seconds (0: not at all; None: forever).

        Entries whose lease ran out come first, then new ones. Returns `None` on timeout or
        when the bus closes during the wait; raises `BusError` when called on a closed bus or
        when Redis is unreachable (the caller backs off and tries again).
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        give_up_at = None if timeout is None else loop.time() + max(timeout, 0.0)
        # After a wait that brought nothing, a look for leases that ran out meanwhile. A receive
        # whose last one waited in vain (a loop over a quiet queue) ended with such a look: it
        # waits for new work first, and looks again at its next re-check.
        pair = (queue, consumer)
        look = timeout == 0 or pair not in self._waited_in_vain
        waited = False
        try:
            while not self._closed:
                if look:
                    delivery = await self._take(queue, consumer)
                    if delivery is not None:
                        self._waited_in_vain.discard(pair)
                        return delivery
                look = True
                now = loop.time()
                if give_up_at is not None and give_up_at <= now:
                    if waited:
                        self._waited_in_vain.add(pair)
                    return None
                wait = self._recheck_seconds
                if give_up_at is not None:
                    wait = min(wait, give_up_at - now)
                delivery = await self._read_new(queue, consumer, wait)
                if delivery is not None:
                    self._waited_in_vain.discard(pair)
                    return delivery
                waited = True
        except BusError:
            if self._closed:
                return None
            raise
        return None

    async def publish(self, topic: str, envelope: BusPayload) -> None:
        """`PUBLISH` to the topic's channel (nobody subscribed: dropped)."""
        data = self._encode(envelope)
        channel = self._keys.topic_channel(topic)
        with self._command(f"publish on {topic}"):
            await self._client.publish(channel, data)

    async def subscribe(self, topic: str) -> Subscription:
        """A subscription, on a connection of its own, to envelopes published from now on."""
        self._check_open()
        subscription = RedisSubscription(
            self._client.pubsub(), self._keys.topic_channel(topic), self._subscriptions.discard
        )
        try:
            with self._command(f"subscribe to {topic}"):
                await subscription.start()
        except BaseException:
            await subscription.aclose()
            raise
        self._subscriptions.add(subscription)
        return subscription

    async def dead_letters(self, queue: str) -> list[BusPayload]:
        """Entries given up on after `max_deliveries` deliveries, oldest first.

        Entries whose last allowed lease ran out are moved there first. Entries dead-lettered
        as undecodable stay in the dead-letter stream but are not listed.
        """
        return [
            entry.envelope
            for entry in await self.dead_letter_entries(queue)
            if entry.envelope is not None
        ]

    async def dead_letter_entries(self, queue: str) -> list[DeadLetter]:
        """The queue's dead letters with their dead-letter stream ids, oldest first.

        Entries whose last allowed lease ran out are moved there first; an undecodable entry
        is listed with no envelope.
        """
        stream, dlq = self._keys.queue_stream(queue), self._keys.dead_letters(queue)
        with self._command(f"read the dead letters of {queue}"):
            try:
                swept = await self._sweep_script(
                    keys=[stream, dlq],
                    args=[
                        CONSUMER_GROUP,
                        self._lease_ms,
                        self._max_deliveries,
                        self._maxlen,
                        _SWEEP_BATCH,
                    ],
                )
            except ResponseError as exc:
                if not _group_is_gone(exc):
                    raise
                swept = []  # never consumed: nothing can have expired
            self._log_dead(queue, swept)
            entries = await self._client.xrange(dlq)
        found = []
        for entry_id, fields in entries or ():
            fields = fields or {}
            data = fields.get(b"data")
            envelope = None
            if isinstance(data, bytes) and data:
                with contextlib.suppress(BusError):
                    envelope = decode(data)
            reason = fields.get(b"reason") or b""
            deliveries = fields.get(b"deliveries") or b"0"
            found.append(
                DeadLetter(
                    _text(entry_id or b""),
                    queue,
                    envelope,
                    int(_text(deliveries) or 0),
                    _text(reason) or "max_deliveries",
                )
            )
        return found

    async def drop_dead_letter(self, queue: str, entry_id: str) -> bool:
        """`XDEL` one entry of the queue's dead-letter stream; False if there was none."""
        with self._command(f"drop a dead letter of {queue}"):
            try:
                removed = await self._client.xdel(self._keys.dead_letters(queue), entry_id)
            except ResponseError:
                return False  # not a stream id at all
        return int(removed) == 1

    async def ping(self) -> None:
        """Ask Redis for a PING; `BusError` if it does not answer (a readiness check)."""
        with self._command("ping"):
            await self._client.ping()

    async def queue_stats(self, queue: str) -> QueueStats:
        """Entries not yet acked (acked ones are deleted), the oldest one's age by its stream
        id, and the dead letters."""
        stream, dlq = self._keys.queue_stream(queue), self._keys.dead_letters(queue)
        with self._command(f"read the size of {queue}"):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.xlen(stream)
                pipe.xrange(stream, count=1)
                pipe.xlen(dlq)
                depth, first, dead = await pipe.execute()
            seconds, micros = await self._client.time()
        now_ms = seconds * 1000 + micros // 1000
        age = 0.0
        if first:
            enqueued_ms = int(_text(first[0][0]).split("-")[0])
            age = max((now_ms - enqueued_ms) / 1000, 0.0)
        return QueueStats(depth=int(depth), oldest_seconds=age, dead=int(dead))

    async def close(self) -> None:
        """Wake pending receives (they return `None`), end subscriptions, close the client."""
        if self._closed:
            return
        self._closed = True
        reads = tuple(self._reads)
        for read in reads:
            read.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_GRACE_SECONDS):
                await self._in_flight.idle.wait()
                # A cancelled read may still be connecting: closing the pool under it would
                # leave its connection open and unowned.
                if reads:
                    await asyncio.wait(reads)
        for subscription in tuple(self._subscriptions):
            await subscription.aclose()
        if self._owns_client:
            await self._client.aclose()

    async def _take(self, queue: str, consumer: str) -> Delivery | None:
        """Claim an expired entry or read a new one, without waiting."""
        stream, dlq = self._keys.queue_stream(queue), self._keys.dead_letters(queue)
        keys = [stream, dlq]
        args: list[str | int] = [
            CONSUMER_GROUP,
            consumer,
            self._lease_ms,
            self._max_deliveries,
            self._maxlen,
        ]

        async def take() -> list[Any]:
            reply: list[Any] = await self._take_script(keys=keys, args=args)
            return reply

        while True:
            with self._command(f"receive from {queue}"):
                dead, *entry = await self._in_group(stream, take)
            self._log_dead(queue, dead)
            if not entry:
                return None
            entry_id, data, attempt = entry
            delivery = await self._deliver(queue, consumer, _text(entry_id), data, attempt)
            if delivery is not None:
                return delivery

    async def _read_new(self, queue: str, consumer: str, wait: float) -> Delivery | None:
        """Block up to `wait` seconds for a new entry; `close` cancels the wait."""
        stream = self._keys.queue_stream(queue)
        block_ms = max(1, math.ceil(wait * 1000))  # BLOCK 0 would mean forever

        async def blocking_read() -> Any:
            # Created inside the task, so a task cancelled before it starts leaves no
            # never-awaited redis-py coroutine behind.
            return await self._client.xreadgroup(
                CONSUMER_GROUP, consumer, {stream: ">"}, count=1, block=block_ms
            )

        async def read() -> Any:
            task = asyncio.ensure_future(blocking_read())
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)
            try:
                # Not `await task`: a caller cancelled during the blocking read must not
                # wait for redis-py to give the read up (it may not, until the block ends).
                await asyncio.wait({task})
            except asyncio.CancelledError:
                task.cancel()
                raise
            return task.result()

        try:
            with self._command(f"receive from {queue}"):
                reply = await self._in_group(stream, read)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closed and (current is None or not current.cancelling()):
                return None  # `close` cancelled the read, not our caller
            raise
        entry = _first_read_entry(reply)
        if entry is None:
            return None
        return await self._deliver(queue, consumer, entry[0], entry[1], 1)

    async def _deliver(
        self, queue: str, consumer: str, entry_id: str, data: bytes | None, attempt: int
    ) -> Delivery | None:
        """The delivery of a claimed entry, or None if it was undecodable (then dead-lettered)."""
        try:
            envelope = decode(data or b"")
        except BusError as exc:
            logger.warning("bus entry %s on queue %s is undecodable: %s", entry_id, queue, exc)
            await self._settle(queue, entry_id, consumer, attempt, "bury", data=data or b"")
            return None
        return _RedisDelivery(self._settle, queue, consumer, entry_id, attempt, envelope)

    async def _settle(
        self,
        queue: str,
        entry_id: str,
        consumer: str,
        attempt: int,
        action: _Settlement,
        *,
        data: bytes = b"",
    ) -> None:
        """Ack, nack or dead-letter an entry if `consumer` still holds it at `attempt`."""
        reason = "undecodable" if action == "bury" else ""
        keys = [self._keys.queue_stream(queue), self._keys.dead_letters(queue)]
        args: list[str | int | bytes] = [
            CONSUMER_GROUP,
            entry_id,
            consumer,
            attempt,
            action,
            self._lease_ms,
            self._maxlen,
            reason,
            data,
        ]
        with self._command(f"{action} entry {entry_id} on {queue}"):
            try:
                await self._settle_script(keys=keys, args=args)
            except ResponseError as exc:
                if not _group_is_gone(exc):
                    raise
                # Redis lost the stream and its group: there is no entry left to settle.

    async def _in_group(self, stream: str, operation: Callable[[], Awaitable[_T]]) -> _T:
        """Run a consumer-group command, creating the group first (or again, if Redis lost it)."""
        if stream not in self._groups:
            await self._create_group(stream)
        try:
            return await operation()
        except ResponseError as exc:
            if not _group_is_gone(exc):
                raise
        self._groups.discard(stream)
        await self._create_group(stream)
        return await operation()

    async def _create_group(self, stream: str) -> None:
        # From id 0, not `$`: everything already in the stream is work still to do (acked
        # entries are deleted), including entries enqueued before any consumer came.
        try:
            await self._client.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if not str(exc).startswith("BUSYGROUP"):
                raise
        self._groups.add(stream)

    def _log_dead(self, queue: str, dead: list[Any]) -> None:
        for entry_id, deliveries in zip(dead[::2], dead[1::2], strict=True):
            logger.warning(
                "bus entry %s on queue %s dead-lettered after %d deliveries",
                _text(entry_id),
                queue,
                deliveries,
            )

    def _command(self, action: str) -> _Command:
        """Around every use of the client: refused once closed, counted, errors translated."""
        self._check_open()
        return _Command(self._in_flight, action)

    def _check_open(self) -> None:
        if self._closed:
            raise BusError("the bus is closed")

    def _encode(self, envelope: BusPayload) -> bytes:
        self._check_open()
        try:
            return encode(envelope)
        except (TypeError, ValueError, OverflowError) as exc:
            raise BusError(f"cannot encode {type(envelope).__name__} for the bus: {exc}") from exc
