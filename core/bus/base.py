"""The `Bus` protocol: work queues with acknowledgement, and fan-out topics.

Queues (`outbound.<platform>`, `receipts`) are at-least-once: a delivery that is not acked
within the lease is given again to some consumer, and after `max_deliveries` it moves to the
queue's dead letters. Topics (`events`) are at-most-once fan-out to whoever is subscribed.
Implementations: `SqliteBus` (the embedded deployment and the terminal chat: queues in a SQLite
file, topics in memory) and, with the distributed deployment, `RedisBus`; both pass
`tests/contract/test_bus_contract.py`, as does the tests' `MemoryBus` (`tests/backends/`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from core.envelopes import (
    EventEnvelope,
    Inbound,
    NotificationFailed,
    NotificationSent,
    Outbound,
    Receipt,
)

__all__ = ["Bus", "BusPayload", "DeadLetter", "Delivery", "Subscription"]

BusPayload = Inbound | Outbound | EventEnvelope | Receipt | NotificationSent | NotificationFailed


@dataclass(frozen=True)
class DeadLetter:
    """One entry of a queue's dead letters, as `switchboard deadletters` shows it.

    `envelope` is None when the stored bytes could not be decoded (Redis keeps those too).
    """

    id: str
    queue: str
    envelope: BusPayload | None
    deliveries: int
    reason: str = "max_deliveries"


class Delivery(Protocol):
    """One received queue entry. Ack it once its effect is durable."""

    @property
    def id(self) -> str:
        """The bus's id for this entry (stable across redeliveries)."""
        ...

    @property
    def envelope(self) -> BusPayload:
        """The decoded payload."""
        ...

    @property
    def attempt(self) -> int:
        """1 on first delivery, 2 on the first redelivery, and so on."""
        ...

    async def ack(self) -> None:
        """Done: the entry will not be delivered again."""
        ...

    async def nack(self) -> None:
        """Not done: make the entry available again now (counts as a delivery)."""
        ...


class Subscription(Protocol):
    """A live subscription to a topic; iterate for envelopes, `aclose()` to leave."""

    def __aiter__(self) -> AsyncIterator[BusPayload]: ...

    async def aclose(self) -> None:
        """Stop receiving; pending iteration ends."""
        ...


class Bus(Protocol):
    """Queues and topics carrying `core.envelopes` payloads."""

    async def enqueue(
        self,
        queue: str,
        envelope: BusPayload,
        *,
        dedupe_id: str | None = None,
    ) -> str | None:
        """Append to a work queue; returns the entry id.

        With `dedupe_id`, an envelope enqueued on this queue under the same id before (within a
        day) is not added again and None is returned: a worker that repeats a turn after a
        crash sends its reply once. (Ids name their destination, so the SQLite and in-memory
        buses, which remember them across queues, behave the same; Redis keeps each queue's
        marks in that queue's cluster slot.)
        """
        ...

    async def receive(
        self, queue: str, *, consumer: str, timeout: float | None = None
    ) -> Delivery | None:
        """The next entry for this consumer, waiting up to `timeout` seconds.

        `timeout=None` waits until an entry arrives or the bus closes; `timeout=0` does not wait.

        Returns `None` on timeout or when the bus closes during the wait; raises `BusError` if
        the bus is closed or unreachable. An entry whose lease expired unacked is redelivered.
        """
        ...

    async def publish(self, topic: str, envelope: BusPayload) -> None:
        """Fan out to the topic's current subscribers (nobody listening: dropped)."""
        ...

    async def subscribe(self, topic: str) -> Subscription:
        """Start receiving the topic's envelopes published from now on."""
        ...

    async def dead_letters(self, queue: str) -> list[BusPayload]:
        """Entries that were delivered `max_deliveries` times without an ack."""
        ...

    async def dead_letter_entries(self, queue: str) -> list[DeadLetter]:
        """The queue's dead letters with their ids, oldest first (for listing and replay)."""
        ...

    async def drop_dead_letter(self, queue: str, entry_id: str) -> bool:
        """Remove one dead letter for good; False if the queue has none with that id."""
        ...

    async def close(self) -> None:
        """Release resources; pending receives return `None`."""
        ...
