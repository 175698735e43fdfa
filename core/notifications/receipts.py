"""`ReceiptDesk`: what became of each proactive delivery, recorded and fanned out.

Gateways put a `Receipt` on the `receipts` queue for every `Outbound` that has a `source`
(`channels/gateway.py`). The desk takes them off the queue, and for each:

1. a schedule run's answer: the receipt is reported to the `ScheduleBook`
   (`record_delivery`), which sets the run's delivery and counts an answer that failed or was
   dead-lettered as a failure of the schedule (its rules, its thresholds); the desk sends the
   failure alert the book returns;
2. every receipt: a `notification.sent` or `notification.failed` event goes to the
   `notifications` topic, its text scrubbed of secrets.

A receipt is handled once (a processed mark), so a redelivered one counts no second failure.
"""

from __future__ import annotations

import asyncio
import logging

from core.bus.base import Bus
from core.bus.names import NOTIFICATIONS, RECEIPTS, outbound_queue
from core.envelopes import (
    NotificationFailed,
    NotificationSent,
    NotificationSource,
    Outbound,
    Receipt,
    new_id,
)
from core.readiness import Readiness, keep_trying
from core.redact import Redactor
from core.scheduling.book import ScheduleBook
from core.scheduling.models import ScheduleRun
from core.store.base import Store

__all__ = ["ReceiptDesk", "delivery_summary", "notification_event", "notification_line"]

log = logging.getLogger(__name__)

# How long one receive waits before the loop looks at `stop()` again.
_WAIT = 5.0
_AFTER_A_FAULT = 1.0


def notification_event(
    receipt: Receipt, redactor: Redactor
) -> NotificationSent | NotificationFailed:
    """The `notifications` topic's event for a receipt (the text scrubbed)."""
    outbound = receipt.outbound
    source = outbound.source or NotificationSource(kind="cli", name="unknown")
    fields = {
        "address": outbound.address,
        "source": source,
        "text": redactor(outbound.text),
        "status": receipt.status,
        "platform_message_id": receipt.platform_message_id,
        "reason": redactor(receipt.reason),
        "attempt": receipt.attempt,
        "at": receipt.at,
    }
    if receipt.status == "delivered":
        return NotificationSent.model_validate(fields)
    return NotificationFailed.model_validate(fields)


def notification_line(event: NotificationSent | NotificationFailed) -> str:
    """One line for `switchboard events --topic notifications`."""
    source = event.source
    origin = f"{source.kind}:{source.name}"
    if event.status == "delivered":
        outcome = f"message={event.platform_message_id}" if event.platform_message_id else ""
    else:
        outcome = f"{event.status}: {event.reason}"[:120]
    text = event.text[:80].replace("\n", " ")
    return f"{event.at:%H:%M:%S} {event.name:<20} {event.address} {origin} {outcome} | {text}"


def delivery_summary(run: ScheduleRun) -> str:
    """A short word on a run's delivery for `schedule runs`."""
    match run.delivery:
        case "delivered":
            return f"yes ({run.delivery_detail})" if run.delivery_detail else "yes"
        case "pending":
            return "pending"
        case "failed":
            return "failed"
        case "dead_lettered":
            return "dead letter"
        case _:
            return "no"


class ReceiptDesk:
    """Consumes the `receipts` queue until `stop()`."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        book: ScheduleBook,
        redactor: Redactor,
        readiness: Readiness,
        consumer: str | None = None,
    ) -> None:
        self.bus = bus
        self.store = store
        self.book = book
        self.redactor = redactor
        self.readiness = readiness
        self.consumer = consumer or f"receipts-{new_id()[:8]}"
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Handle receipts as they come, until `stop()`."""
        while not self._stopping.is_set():
            try:
                delivery = await keep_trying(
                    self.readiness,
                    "receipts",
                    lambda: self.bus.receive(RECEIPTS, consumer=self.consumer, timeout=_WAIT),
                    stopping=self._stopping,
                )
                if delivery is None:
                    continue
                if isinstance(delivery.envelope, Receipt):
                    await self.handle(delivery.envelope)
                else:
                    log.error(
                        "dropping a %s found on %s", type(delivery.envelope).__name__, RECEIPTS
                    )
                await delivery.ack()
            except Exception:
                if self._stopping.is_set():
                    return
                # A receipt that could not be handled is left unacked: it comes back later.
                log.exception("handling a delivery receipt failed; carrying on")
                await asyncio.sleep(_AFTER_A_FAULT)

    async def stop(self) -> None:
        """Finish the receipt in hand and return from `run()`."""
        self._stopping.set()

    async def handle(self, receipt: Receipt) -> None:
        """Record the receipt on its run (counting a failed answer) and fan it out."""
        mark = f"receipt:{receipt.id}"
        if await self.store.is_processed(mark):
            return
        source = receipt.outbound.source
        if source is not None and source.kind == "schedule" and source.run_id:
            await self._record(receipt, source)
        await self.bus.publish(NOTIFICATIONS, notification_event(receipt, self.redactor))
        await self.store.mark_processed(mark)

    async def _record(self, receipt: Receipt, source: NotificationSource) -> None:
        """Report the receipt to the schedule's book, and send the failure alert it returns."""
        assert source.run_id is not None
        detail = (
            receipt.platform_message_id or "" if receipt.status == "delivered" else receipt.reason
        )
        alert = await self.book.record_delivery(
            source.name, source.run_id, state=receipt.status, detail=detail, at=receipt.at
        )
        if alert is None:
            return
        outbound = Outbound(
            kind="notification",
            address=alert.address,
            text=alert.text,
            source=NotificationSource(kind="alert", name=source.name, run_id=source.run_id),
        )
        await self.bus.enqueue(
            outbound_queue(alert.address.platform), outbound, dedupe_id=f"alert:{receipt.id}"
        )
