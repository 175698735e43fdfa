"""The gateway between an adapter and the bus."""

from __future__ import annotations

from channels.base import InboundSink
from channels.gateway import Gateway
from core.bus import BusPayload
from core.bus.memory import MemoryBus
from core.bus.names import INBOUND
from core.envelopes import Address, Inbound, Outbound
from core.errors import BusError


class _FlakyBus(MemoryBus):
    """Refuses the first `failures` enqueues, like Redis during a restart."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def enqueue(
        self, queue: str, envelope: BusPayload, *, dedupe_id: str | None = None
    ) -> str | None:
        if self.failures:
            self.failures -= 1
            raise BusError("connection refused")
        return await super().enqueue(queue, envelope, dedupe_id=dedupe_id)


class _Adapter:
    """A channel adapter that is never run: the test only publishes through the gateway."""

    platform = "terminal"
    bot_key = "local"

    async def run(self, sink: InboundSink) -> None:
        """Never called."""

    async def deliver(self, outbound: Outbound) -> None:
        """Never called."""

    async def stop(self) -> None:
        """Nothing to stop."""


async def test_a_message_waits_for_the_bus_instead_of_being_dropped() -> None:
    bus = _FlakyBus(failures=2)
    gateway = Gateway(_Adapter(), bus)
    inbound = Inbound(address=Address(platform="terminal", chat="c"), text="hello")

    await gateway.publish(inbound)

    delivery = await bus.receive(INBOUND, consumer="w", timeout=0)
    assert delivery is not None and delivery.envelope == inbound
    assert bus.failures == 0
    await bus.close()
