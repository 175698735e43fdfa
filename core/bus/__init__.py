"""The message bus: what leaves a worker (outbound queues, receipts) and fan-out topics.

Inbound work does not cross the bus: producers put it in its session's mailbox
(`core/mailbox/`).

`SqliteBus` (the embedded deployment and the terminal chat: durable queues in a SQLite file,
topics in the process, `local_topics.py`) and `RedisBus` (the distributed deployment); tests
have a `MemoryBus` of their own (`tests/backends/`).

`RedisBus` is imported on first use, so a process without Redis never loads redis-py.
"""

from typing import TYPE_CHECKING, Any

from core.bus.base import Bus, BusPayload, DeadLetter, Delivery, Subscription
from core.bus.names import EVENTS, outbound_queue
from core.bus.sqlite import SqliteBus

if TYPE_CHECKING:
    from core.bus.redis import RedisBus

__all__ = [
    "EVENTS",
    "Bus",
    "BusPayload",
    "DeadLetter",
    "Delivery",
    "RedisBus",
    "SqliteBus",
    "Subscription",
    "outbound_queue",
]


def __getattr__(name: str) -> Any:
    if name == "RedisBus":
        from core.bus.redis import RedisBus

        return RedisBus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
