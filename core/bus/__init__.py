"""The message bus: work queues and fan-out topics between gateways, workers and schedulers."""

from core.bus.base import Bus, BusPayload, Delivery, Subscription
from core.bus.memory import MemoryBus
from core.bus.names import EVENTS, INBOUND, outbound_queue

__all__ = [
    "EVENTS",
    "INBOUND",
    "Bus",
    "BusPayload",
    "Delivery",
    "MemoryBus",
    "Subscription",
    "outbound_queue",
]
