"""What a work queue holds right now: for `/metrics` and `switchboard status`.

Each bus implementation answers `queue_stats(queue)`; it is not part of the `Bus` protocol
(test buses need not have it), so readers check for it with `QueueStatsReader`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from core.bus.base import BusPayload
from core.envelopes import Inbound, Outbound

__all__ = ["QueueStats", "QueueStatsReader", "enqueued_at"]


@dataclass(frozen=True)
class QueueStats:
    """Entries waiting or in flight, the age of the oldest in seconds (0 when empty), and
    entries in the queue's dead letters."""

    depth: int
    oldest_seconds: float
    dead: int


@runtime_checkable
class QueueStatsReader(Protocol):
    """A bus that can say how full its queues are."""

    async def queue_stats(self, queue: str) -> QueueStats:
        """The queue's depth, oldest entry's age and dead letters, now."""
        ...


def enqueued_at(envelope: BusPayload) -> datetime:
    """When an envelope was made: the closest thing to its enqueue time a bus keeps."""
    if isinstance(envelope, Inbound):
        return envelope.received_at
    if isinstance(envelope, Outbound):
        return envelope.created_at
    return envelope.at  # events, receipts and notification events carry `at`
