"""The message bus: work queues and fan-out topics between gateways, workers and schedulers.

`RedisBus` is imported on first use, so a process without Redis never loads redis-py.
"""

from typing import TYPE_CHECKING, Any

from core.bus.base import Bus, BusPayload, Delivery, Subscription
from core.bus.memory import MemoryBus
from core.bus.names import EVENTS, INBOUND, outbound_queue

if TYPE_CHECKING:
    from core.bus.redis import RedisBus

__all__ = [
    "EVENTS",
    "INBOUND",
    "Bus",
    "BusPayload",
    "Delivery",
    "MemoryBus",
    "RedisBus",
    "Subscription",
    "outbound_queue",
]


def __getattr__(name: str) -> Any:
    if name == "RedisBus":
        from core.bus.redis import RedisBus

        return RedisBus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
