"""Topics of `RedisBus` (`core/backends/redis/bus.py`): a pub/sub subscription that outlives a Redis
restart, and how redis-py's errors become the bus's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.backends.redis.client import is_outage
from core.bus.base import BusPayload, Subscription
from core.envelopes import decode
from core.errors import BusError, BusUnavailable
from core.tasks import cancel_and_wait

__all__ = ["RedisSubscription", "bus_error", "redis_errors"]

logger = logging.getLogger(__name__)

# How long `subscribe` waits for Redis to confirm the subscription.
_SUBSCRIBE_TIMEOUT_SECONDS = 10.0
# The longest a subscription whose connection dropped waits between attempts to reconnect.
_MAX_RESUBSCRIBE_DELAY_SECONDS = 2.0


@contextlib.contextmanager
def redis_errors(action: str) -> Iterator[None]:
    """Turn redis-py's exceptions into `BusError` (the messages name host and port only)."""
    try:
        yield
    except RedisError as exc:
        raise bus_error(action, exc) from exc


def bus_error(action: str, exc: RedisError) -> BusError:
    """The `BusError` a redis-py exception becomes (its message names host and port only)."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return BusUnavailable(f"cannot {action}: Redis is unreachable ({exc})")
    if is_outage(exc):
        return BusUnavailable(f"cannot {action}: Redis cannot take it for now ({exc})")
    return BusError(f"cannot {action}: Redis refused ({exc})")


class RedisSubscription(Subscription):
    """A pub/sub connection of its own, pumped by a task into an inbox of encoded envelopes.

    A dropped connection is made again (and the channel subscribed again) until `aclose`, so a
    Redis restart costs only what is published meanwhile. Iteration raises `BusError` once if
    Redis refuses the subscription, then ends.
    """

    def __init__(
        self, pubsub: PubSub, channel: str, leave: Callable[[RedisSubscription], None]
    ) -> None:
        self._pubsub = pubsub
        self._channel = channel
        self._leave = leave
        # None is the end marker.
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._ended = False
        self._closed = False
        self._error: BusError | None = None
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Subscribe, and return once Redis confirms (so publishes from now on arrive)."""
        with redis_errors(f"subscribe to {self._channel}"):
            await self._pubsub.subscribe(self._channel)
            try:
                async with asyncio.timeout(_SUBSCRIBE_TIMEOUT_SECONDS):
                    while True:
                        message = await self._pubsub.get_message(timeout=None)
                        if message is not None and message["type"] == "subscribe":
                            break
            except TimeoutError as exc:
                raise BusError(
                    f"Redis did not confirm the subscription to {self._channel}"
                ) from exc
        self._pump = asyncio.create_task(self._listen(), name=f"bus subscription {self._channel}")

    def __aiter__(self) -> RedisSubscription:
        return self

    async def __anext__(self) -> BusPayload:
        while not self._ended:
            data = await self._inbox.get()
            if data is None or self._ended:
                # Pass the end marker on, in case more than one task iterates this subscription.
                self._inbox.put_nowait(None)
                break
            try:
                return decode(data)
            except BusError as exc:
                logger.warning("dropped an undecodable event on %s: %s", self._channel, exc)
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop receiving; envelopes not yet iterated are dropped."""
        if self._closed:
            return
        self._closed = True
        self._leave(self)
        self._end()
        if self._pump is not None:
            with contextlib.suppress(RedisError, BusError):
                await cancel_and_wait(self._pump)
        # Closing the connection ends the subscription on the server as well.
        with contextlib.suppress(RedisError):
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py: unannotated

    async def _listen(self) -> None:
        failures = 0
        while True:
            try:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=None
                )
            except (RedisConnectionError, RedisTimeoutError) as exc:
                # redis-py's quick retries gave up: Redis is down or restarting. The next read
                # reconnects and subscribes again; what is published meanwhile is missed.
                failures += 1
                if failures == 1:
                    logger.warning(
                        "subscription to %s interrupted (%s); reconnecting", self._channel, exc
                    )
                await asyncio.sleep(min(_MAX_RESUBSCRIBE_DELAY_SECONDS, 0.05 * 2**failures))
                continue
            except RedisError as exc:
                logger.warning("subscription to %s lost: %s", self._channel, exc)
                self._error = BusError(f"subscription to {self._channel} lost: {exc}")
                self._end()
                return
            if failures:
                logger.info("subscription to %s restored", self._channel)
                failures = 0
            if message is not None and message["type"] == "message":
                self._inbox.put_nowait(message["data"])

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._inbox.put_nowait(None)
