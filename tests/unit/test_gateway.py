"""The gateway between an adapter and the bus."""

from __future__ import annotations

from typing import Any

from channels.gateway import Gateway
from core.bus.memory import MemoryBus
from core.bus.names import INBOUND
from core.envelopes import Address, Inbound
from core.errors import BusError


class _FlakyBus(MemoryBus):
    """Refuses the first `failures` enqueues, like Redis during a restart."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def enqueue(self, queue: str, envelope: Any, *, dedupe_id: str | None = None) -> Any:
        if self.failures:
            self.failures -= 1
            raise BusError("connection refused")
        return await super().enqueue(queue, envelope, dedupe_id=dedupe_id)


class _Adapter:
    platform = "terminal"


async def test_a_message_waits_for_the_bus_instead_of_being_dropped() -> None:
    bus = _FlakyBus(failures=2)
    gateway = Gateway(_Adapter(), bus)  # type: ignore[arg-type]
    inbound = Inbound(address=Address(platform="terminal", chat="c"), text="hello")

    await gateway.publish(inbound)

    delivery = await bus.receive(INBOUND, consumer="w", timeout=0)
    assert delivery is not None and delivery.envelope == inbound
    assert bus.failures == 0
    await bus.close()
