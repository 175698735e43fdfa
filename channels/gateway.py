"""`Gateway`: connects a `ChannelAdapter` to the bus.

Inbound work goes onto the `inbound` queue; the platform's `outbound.<platform>` queue is
consumed and each entry handed to the adapter, acked once it is shown. Ephemeral deliveries
(typing, progress, stream pieces) that fail are dropped; replies and notifications are retried.
Several gateways of one platform may share the queue: each piece of a streamed reply carries
the whole text so far, and the adapters show it through shared reply records
(`channels/streaming.py`), so any gateway may take any piece.
"""

from __future__ import annotations

import asyncio
import logging

from channels.base import ChannelAdapter
from core.bus.base import Bus, Delivery
from core.bus.names import INBOUND, outbound_queue
from core.envelopes import Inbound, Outbound, new_id
from core.errors import BusError, ChannelError
from core.tasks import cancel_and_wait

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

_EPHEMERAL = frozenset({"typing", "progress", "delta"})
_MAX_RETRY_AFTER = 300.0
# How long a received message waits for an unreachable bus before it is given up.
_PUBLISH_PATIENCE = 120.0


class Gateway:
    """Runs one adapter against the bus until the adapter's input ends or `stop()`."""

    def __init__(self, adapter: ChannelAdapter, bus: Bus, *, consumer: str | None = None) -> None:
        self.adapter = adapter
        self.bus = bus
        self.consumer = consumer or f"gateway-{adapter.platform}-{new_id()[:8]}"
        self._queue = outbound_queue(adapter.platform)

    async def publish(self, inbound: Inbound) -> None:
        """The adapter's sink: put inbound work on the bus.

        While the bus is unreachable (Redis restarting) it keeps trying for up to
        `_PUBLISH_PATIENCE` seconds, holding the platform's update instead of dropping it.
        """
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + _PUBLISH_PATIENCE
        failures = 0
        while True:
            try:
                await self.bus.enqueue(INBOUND, inbound)
            except BusError as exc:
                failures += 1
                if loop.time() >= give_up_at:
                    log.error("gave up handing %s to the bus: %s", inbound.dedupe_key, exc)
                    raise
                if failures == 1:
                    log.warning("cannot hand a message to the bus (%s); retrying", exc)
                await asyncio.sleep(min(5.0, 0.2 * 2**failures))
                continue
            if failures:
                log.info("handed %s to the bus after %d retries", inbound.dedupe_key, failures)
            return

    async def run(self) -> None:
        """Receive and deliver until the adapter's `run()` returns."""
        deliveries = asyncio.create_task(self._deliver_forever(), name=self.consumer)
        try:
            await self.adapter.run(self.publish)
        finally:
            await cancel_and_wait(deliveries)

    async def stop(self) -> None:
        """Ask the adapter to stop; `run()` returns once it has."""
        await self.adapter.stop()

    async def _deliver_forever(self) -> None:
        failures = 0
        while True:
            try:
                delivery = await self.bus.receive(self._queue, consumer=self.consumer, timeout=30.0)
            except BusError as exc:
                failures += 1
                delay = min(30.0, 0.5 * 2**failures)
                log.warning("cannot receive deliveries (%s); trying again in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            if failures:
                log.info("receiving deliveries again after %d failed attempt(s)", failures)
            failures = 0
            if delivery is not None:
                await self._deliver(delivery)

    async def _deliver(self, delivery: Delivery) -> None:
        outbound = delivery.envelope
        if not isinstance(outbound, Outbound):
            log.error("dropping a %s found on %s", type(outbound).__name__, self._queue)
            await delivery.ack()
            return
        try:
            await self.adapter.deliver(outbound)
        except ChannelError as exc:
            if exc.permanent:
                log.warning(
                    "gave up a %s for %s: %s", outbound.kind, outbound.address.session_key, exc
                )
                await delivery.ack()
                return
            if outbound.kind in _EPHEMERAL:
                log.info("dropped %s for %s: %s", outbound.kind, outbound.address.session_key, exc)
                await delivery.ack()
                return
            log.warning(
                "delivery to %s failed (attempt %d): %s",
                outbound.address.session_key,
                delivery.attempt,
                exc,
            )
            if exc.retry_after:
                await asyncio.sleep(min(exc.retry_after, _MAX_RETRY_AFTER))
            await delivery.nack()
            return
        except Exception:
            log.exception("adapter %s failed to deliver %s", self.adapter.platform, outbound.id)
            await (delivery.ack() if outbound.kind in _EPHEMERAL else delivery.nack())
            return
        await delivery.ack()
