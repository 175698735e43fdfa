"""The message bus: what leaves a worker (outbound queues, receipts) and fan-out topics.

Inbound work does not cross the bus: producers put it in its session's mailbox
(`core/mailbox/`).

This package holds the protocol (`base.py`) and the queue and topic names (`names.py`). The
implementations are in the backend packages: `SqliteBus` in `core/backends/sql/bus.py` (the
embedded deployment and the terminal chat) and `RedisBus` in `core/backends/redis/bus.py` (the
distributed deployment); tests have a `MemoryBus` of their own (`tests/backends/`).
"""

from core.bus.base import Bus, BusPayload, DeadLetter, Delivery, Subscription
from core.bus.names import EVENTS, outbound_queue

__all__ = [
    "EVENTS",
    "Bus",
    "BusPayload",
    "DeadLetter",
    "Delivery",
    "Subscription",
    "outbound_queue",
]
