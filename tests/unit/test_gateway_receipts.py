"""The gateway's receipts: which deliveries get one, and when an error means dead-lettered."""

from __future__ import annotations

import asyncio

from channels.base import InboundSink
from channels.gateway import Gateway
from core.bus.names import RECEIPTS, outbound_queue
from core.envelopes import Address, NotificationSource, Outbound, Receipt
from core.readiness import Readiness
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes

PATIENCE = 5.0
ADDRESS = Address(platform="terminal", chat="local")


class _BrokenAdapter:
    """An adapter whose every delivery raises an unexpected error."""

    platform = "terminal"
    bot_key = "local"

    def __init__(self) -> None:
        self.tries = 0
        self._stopped = asyncio.Event()

    async def run(self, sink: InboundSink) -> None:
        await self._stopped.wait()

    async def deliver(self, outbound: Outbound) -> None:
        self.tries += 1
        raise RuntimeError("the screen fell off")

    async def stop(self) -> None:
        self._stopped.set()


async def test_an_unexpected_error_on_the_last_attempt_reports_dead_lettered() -> None:
    bus = MemoryBus(max_deliveries=2)
    adapter = _BrokenAdapter()
    gateway = Gateway(
        adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness(), max_deliveries=2
    )
    source = NotificationSource(kind="hook", name="ci")
    plain = Outbound(kind="reply", address=ADDRESS, text="an answer")
    proactive = Outbound(kind="notification", address=ADDRESS, text="CI broke", source=source)
    running = asyncio.create_task(gateway.run())
    try:
        await bus.enqueue(outbound_queue("terminal"), plain)
        await bus.enqueue(outbound_queue("terminal"), proactive)
        delivery = await bus.receive(RECEIPTS, consumer="t", timeout=PATIENCE)
    finally:
        await gateway.stop()
        await running

    assert delivery is not None
    receipt = delivery.envelope
    assert isinstance(receipt, Receipt)
    assert (receipt.status, receipt.attempt) == ("dead_lettered", 2)
    assert receipt.outbound == proactive
    assert "RuntimeError: the screen fell off" in receipt.reason
    # Only the proactive delivery got a receipt; both ended in the dead letters.
    assert await bus.receive(RECEIPTS, consumer="t", timeout=0) is None
    assert await bus.dead_letters(outbound_queue("terminal")) == [plain, proactive]
    assert adapter.tries == 4
    await bus.close()
