"""`LocalTopics`: fan-out topics within one process, the part of `SqliteBus` that never leaves
it (the `events` and `control` topics of the embedded deployment).

At-most-once, like every topic: a subscriber gets what is published after it subscribed, each
subscription with an unbounded inbox of encoded envelopes, decoded as it iterates (so nothing
mutable is shared between publisher and subscriber).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.bus.base import BusPayload, Subscription
from core.envelopes import decode
from core.errors import BusError

__all__ = ["LocalTopics"]


class _LocalSubscription(Subscription):
    """A subscriber's inbox of encoded envelopes."""

    def __init__(self, leave: Callable[[_LocalSubscription], None]) -> None:
        self._leave = leave
        # None is the end marker.
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._ended = False

    def __aiter__(self) -> _LocalSubscription:
        return self

    async def __anext__(self) -> BusPayload:
        if self._ended:
            raise StopAsyncIteration
        data = await self._inbox.get()
        if data is None or self._ended:
            # Pass the end marker on, in case more than one task iterates this subscription.
            self._inbox.put_nowait(None)
            raise StopAsyncIteration
        return decode(data)

    async def aclose(self) -> None:
        """Stop receiving; envelopes not yet iterated are dropped."""
        self._leave(self)
        self.end()

    def push(self, data: bytes) -> None:
        if not self._ended:
            self._inbox.put_nowait(data)

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._inbox.put_nowait(None)


class LocalTopics:
    """The topics of one process: publish hands encoded envelopes to current subscribers."""

    def __init__(self) -> None:
        self._topics: dict[str, set[_LocalSubscription]] = {}
        self._closed = False

    def publish(self, topic: str, data: bytes) -> None:
        """Hand `data` (an encoded envelope) to every current subscriber of `topic`."""
        for subscription in tuple(self._topics.get(topic, ())):
            subscription.push(data)

    def subscribe(self, topic: str) -> Subscription:
        """A subscription to what is published on `topic` from now on."""
        if self._closed:
            raise BusError("the bus is closed")
        subscribers = self._topics.setdefault(topic, set())
        subscription = _LocalSubscription(subscribers.discard)
        subscribers.add(subscription)
        return subscription

    def close(self) -> None:
        """End every subscription (their iteration stops)."""
        self._closed = True
        for subscribers in self._topics.values():
            for subscription in tuple(subscribers):
                subscription.end()
        self._topics.clear()
