"""The gateway between an adapter and the bus."""

from __future__ import annotations

import asyncio

from channels.base import InboundSink
from channels.gateway import Gateway
from core.bus import BusPayload, Delivery
from core.bus.names import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.errors import BusError
from core.readiness import Readiness
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes


class _FlakyMailboxes(MemoryMailboxes):
    """Refuses the first `failures` puts, like Redis during a restart."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def put(self, inbound: Inbound) -> None:
        if self.failures:
            self.failures -= 1
            raise BusError("connection refused")
        await super().put(inbound)


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


async def test_a_message_waits_for_its_mailbox_instead_of_being_dropped() -> None:
    bus = MemoryBus()
    mailboxes = _FlakyMailboxes(failures=2)
    gateway = Gateway(_Adapter(), bus, mailboxes=mailboxes, readiness=Readiness())
    inbound = Inbound(address=Address(platform="terminal", chat="c"), text="hello")

    await gateway.publish(inbound)

    assert mailboxes.failures == 0
    claim = await mailboxes.claim(inbound.session_key, owner="w")
    assert claim is not None
    assert await claim.head() == inbound
    assert await mailboxes.woken(0) == inbound.session_key
    await bus.close()


class _Delivery(Delivery):
    """Wraps a delivery whose ack fails while `bus.settle_failures` lasts (Redis away)."""

    def __init__(self, bus: _AckFailingBus, inner: Delivery) -> None:
        self._bus = bus
        self._inner = inner

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def envelope(self) -> BusPayload:
        return self._inner.envelope

    @property
    def attempt(self) -> int:
        return self._inner.attempt

    async def ack(self, *, later: bool = False) -> None:
        self._bus.ack_calls += 1
        if self._bus.settle_failures:
            self._bus.settle_failures -= 1
            self._bus.refused.set()
            raise BusError("connection refused")
        await self._inner.ack()
        self._bus.acked.set()

    async def nack(self) -> None:
        await self._inner.nack()


class _AckFailingBus(MemoryBus):
    """A bus whose first `settle_failures` acks raise `BusError`, like Redis restarting."""

    def __init__(self, settle_failures: int) -> None:
        super().__init__()
        self.settle_failures = settle_failures
        self.ack_calls = 0
        self.acked = asyncio.Event()
        self.refused = asyncio.Event()

    async def receive(
        self,
        queue: str,
        *,
        consumer: str,
        timeout: float | None = None,  # noqa: ASYNC109 (the Bus protocol's signature)
    ) -> Delivery | None:
        delivery = await super().receive(queue, consumer=consumer, timeout=timeout)
        return None if delivery is None else _Delivery(self, delivery)


class _ShowingAdapter(_Adapter):
    """Records what it was asked to show; runs until stopped."""

    platform = "terminal"

    def __init__(self) -> None:
        self.shown: list[Outbound] = []
        self.new = asyncio.Event()
        self._stopped = asyncio.Event()

    async def run(self, sink: InboundSink) -> None:
        await self._stopped.wait()

    async def deliver(self, outbound: Outbound) -> None:
        self.shown.append(outbound)
        self.new.set()

    async def stop(self) -> None:
        self._stopped.set()


def _reply(text: str) -> Outbound:
    return Outbound(kind="reply", address=Address(platform="terminal", chat="c"), text=text)


async def test_a_failing_ack_does_not_end_the_deliveries() -> None:
    bus = _AckFailingBus(settle_failures=3)
    adapter = _ShowingAdapter()
    readiness = Readiness()
    gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=readiness)
    running = asyncio.create_task(gateway.run())
    try:
        await bus.enqueue(outbound_queue("terminal"), _reply("first"))
        async with asyncio.timeout(10):
            await bus.acked.wait()
        assert bus.ack_calls == 4  # three refused, then acked
        assert (await readiness.report()).ready

        # The delivery loop is still alive: the next reply is shown too.
        adapter.new.clear()
        await bus.enqueue(outbound_queue("terminal"), _reply("second"))
        async with asyncio.timeout(10):
            while len(adapter.shown) < 2:
                await adapter.new.wait()
                adapter.new.clear()
        assert [o.text for o in adapter.shown] == ["first", "second"]
    finally:
        await gateway.stop()
        await running
        await bus.close()


async def test_the_delivery_loop_is_marked_down_while_acks_fail() -> None:
    bus = _AckFailingBus(settle_failures=1_000_000)
    adapter = _ShowingAdapter()
    readiness = Readiness()
    gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=readiness)
    running = asyncio.create_task(gateway.run())
    try:
        await bus.enqueue(outbound_queue("terminal"), _reply("held"))
        async with asyncio.timeout(10):
            while bus.ack_calls < 2:
                await bus.refused.wait()
                bus.refused.clear()
        report = await readiness.report()
        assert not report.ready
        assert "connection refused" in report.details["terminal delivery"]
        assert not running.done()

        bus.settle_failures = 0  # Redis is back
        async with asyncio.timeout(10):
            await bus.acked.wait()
        assert (await readiness.report()).ready
        assert [o.text for o in adapter.shown] == ["held"]
    finally:
        await gateway.stop()
        await running
        await bus.close()
