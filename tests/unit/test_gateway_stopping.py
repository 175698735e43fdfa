"""A gateway that is stopping takes no more deliveries: its adapter may already be closing.

Seen under SIGTERM with answers streaming (`python -m bench faults`): the Telegram adapter
closed its HTTP client while the delivery loop kept taking entries, each failed at once, came
straight back to the same gateway and was dead-lettered within milliseconds.
"""

from __future__ import annotations

import asyncio

from channels.base import InboundSink
from channels.gateway import Gateway
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from core.errors import ChannelError
from core.readiness import Readiness
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes

QUEUE = outbound_queue("terminal")


class _ClosingAdapter:
    """Shows replies until `stop()`; from then on every delivery fails (its client is closed),
    and `run()` returns only when the test lets it (shutting down takes a while)."""

    platform = "terminal"
    bot_key = "local"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.showing = asyncio.Event()
        self.shown: list[str] = []
        self.refused = 0
        self.closing = False
        self.closed = asyncio.Event()

    async def run(self, sink: InboundSink) -> None:
        await self.closed.wait()

    async def deliver(self, outbound: Outbound) -> None:
        if self.closing:
            self.refused += 1
            raise ChannelError("This HTTPXRequest is not initialized!")
        self.showing.set()
        await self.gate.wait()  # being shown when the stop comes
        self.shown.append(outbound.text)

    async def stop(self) -> None:
        self.closing = True


def _reply(text: str) -> Outbound:
    return Outbound(kind="reply", address=Address(platform="terminal", chat="c"), text=text)


async def test_what_is_queued_when_the_gateway_stops_stays_queued_for_the_next_one() -> None:
    bus = MemoryBus()
    adapter = _ClosingAdapter()
    gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness())
    running = asyncio.create_task(gateway.run())
    try:
        await bus.enqueue(QUEUE, _reply("in flight"))
        await bus.enqueue(QUEUE, _reply("still queued"))
        async with asyncio.timeout(5):
            await adapter.showing.wait()
        await gateway.stop()
        adapter.gate.set()
        # Let the delivery loop run as far as it will; the bus is in memory, so it needs only
        # turns of the event loop, no time.
        for _ in range(200):
            await asyncio.sleep(0)
        adapter.closed.set()
        await asyncio.wait_for(running, 5)

        assert adapter.shown == ["in flight"]
        assert adapter.refused == 0
        left = await bus.receive(QUEUE, consumer="next-gateway", timeout=0)
        assert left is not None and isinstance(left.envelope, Outbound)
        assert left.envelope.text == "still queued"
    finally:
        await bus.close()
