"""The message bus: work queues and fan-out topics between gateways, workers and schedulers."""

from core.bus.base import Bus, BusPayload, Delivery, Subscription
from core.bus.memory import MemoryBus
from core.bus.names import EVENTS, INBOUND, outbound_queue
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
