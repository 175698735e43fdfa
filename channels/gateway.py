"""`Gateway`: connects a `ChannelAdapter` to the sessions' mailboxes and the bus.

Inbound work goes straight into its session's mailbox (`accept_inbound`; cancels, `/stop` and
confirmation answers on the `control` topic as well); the platform's `outbound.<platform>` queue is
consumed and each entry handed to the adapter, acked once it is shown. Ephemeral deliveries
(typing, progress, stream pieces) that fail are dropped; replies and notifications are retried.
Several gateways of one platform may share the queue: each piece of a streamed reply carries
the whole text so far, and the adapters show it through shared reply records
(`channels/streaming.py`), so any gateway may take any piece.

A proactive delivery (an `Outbound` with a `source`: a schedule's answer or alert, an external
notification) is reported back on the `receipts` queue once its outcome is known: `delivered`
with the platform's message id (read from the reply record), `failed` when the platform
refused for good, `dead_lettered` when its last allowed attempt failed (the bus then parks it
in the queue's dead letters, where `switchboard deadletters` finds it).

Deliveries go out concurrently across chats and in order within one: each chat has a lane
that shows its deliveries one at a time, in the order they were received, and at most
`concurrency` deliveries are held at once. A rate limit (a 429 with its `retry_after`) is
waited out in the chat's lane and the delivery tried again there, so it delays only that chat
and the chat's later deliveries stay behind it; another failure sends the entry back to the
queue (`nack`) to be tried again (the chat's later deliveries may go out before it). A stopping
gateway gives back what it has not begun.

While the mailboxes or the bus are unreachable (Redis restarting) both loops keep trying with
backoff and mark themselves down in the process's `Readiness`; an ack that cannot be made is
tried again too, and if the entry comes back anyway, showing it again is harmless (the reply
records skip a reply already shown).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable

from opentelemetry.trace import SpanKind

from channels.base import ChannelAdapter, ReportsPolls
from core.bus.base import Bus, Delivery
from core.bus.names import RECEIPTS, outbound_queue
from core.envelopes import Inbound, Outbound, Receipt, ReceiptStatus, new_id
from core.errors import BusError, ChannelError, StoreError
from core.logcontext import log_context
from core.mailbox.base import Mailboxes
from core.mailbox.intake import accept_inbound
from core.metrics import Metrics
from core.readiness import Readiness, keep_trying
from core.store.replies import ReplyRecords
from core.tasks import cancel_and_wait
from core.tracing import handed_over, span
from core.watchdog import Watchdog

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

_EPHEMERAL = frozenset({"typing", "progress", "delta"})
# The delivery outcomes the watchdog hears of (a refused delivery tried again tells it too).
_WATCHED = frozenset({"delivered", "failed", "dropped"})
_MAX_RETRY_AFTER = 300.0
# How long one receive waits for a delivery; the delivery loop is marked up again only when
# one returns, so this bounds how late readiness notices the bus is back.
_WAIT = 5.0
# How long the delivery loop pauses after an unexpected error before it carries on.
_AFTER_A_FAULT = 1.0
# How long a stopping gateway lets the deliveries it has begun finish (shown and acked) before
# cancelling them; one not acked comes back and is shown again by the next run.
_FINISH_GRACE = 5.0
# Deliveries held at once (being shown, or waiting in their chat's lane).
_CONCURRENCY = 32


class Gateway:
    """Runs one adapter against the mailboxes and the bus until the adapter's input ends or
    `stop()`."""

    def __init__(
        self,
        adapter: ChannelAdapter,
        bus: Bus,
        *,
        mailboxes: Mailboxes,
        readiness: Readiness,
        consumer: str | None = None,
        replies: ReplyRecords | None = None,
        max_deliveries: int = 5,
        metrics: Metrics | None = None,
        concurrency: int = _CONCURRENCY,
        watchdog: Watchdog | None = None,
    ) -> None:
        """`mailboxes` take the adapter's inbound work; `readiness` is the process's: the
        intake and delivery loops report to it.

        `replies` (the records the adapter shows replies through) give a delivered
        notification's platform message id to its receipt; `max_deliveries` is the bus's, so
        the gateway knows which failed attempt sends an entry to the dead letters; `metrics`
        counts deliveries by outcome; `concurrency` bounds the deliveries held at once (across
        chats; one chat's are shown one at a time); `watchdog` hears of every update, poll
        and delivery (`core/watchdog.py`).
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.metrics = metrics
        self.watchdog = watchdog
        self.adapter = adapter
        self.bus = bus
        self.mailboxes = mailboxes
        self.readiness = readiness
        self.replies = replies
        self.max_deliveries = max_deliveries
        self.consumer = consumer or f"gateway-{adapter.platform}-{new_id()[:8]}"
        self._queue = outbound_queue(adapter.platform)
        self._intake = f"{adapter.platform} intake"
        self._delivery = f"{adapter.platform} delivery"
        self._stopping = asyncio.Event()
        self._held = asyncio.Semaphore(concurrency)
        # Per chat: the deliveries received and not yet settled, the one being shown first.
        self._lanes: dict[str, deque[Delivery]] = {}
        self._draining: set[asyncio.Task[None]] = set()

    async def publish(self, inbound: Inbound) -> None:
        """The adapter's sink: put inbound work in its session's mailbox.

        While the mailboxes are unreachable (Redis restarting) it keeps trying, holding the
        platform's update instead of dropping it; once `stop()` was asked it gives up
        (`BusError`) at the next failure.
        """
        if self.watchdog is not None:
            self.watchdog.received(self.adapter.platform)
        await keep_trying(
            self.readiness,
            self._intake,
            lambda: accept_inbound(inbound, mailboxes=self.mailboxes, bus=self.bus),
            stopping=self._stopping,
        )

    async def run(self, *, receive_after: Awaitable[bool] | None = None) -> None:
        """Receive and deliver until the adapter's `run()` returns.

        `receive_after`: a gateway standing by for the platform's reader lease delivers
        meanwhile (for an adapter that can deliver before its `run()`), and starts receiving
        once it is True; False (stopped first) ends the run without receiving.
        """
        if self.watchdog is not None and isinstance(self.adapter, ReportsPolls):
            watchdog, platform = self.watchdog, self.adapter.platform
            self.adapter.on_poll(lambda: watchdog.polled(platform))
        # Both loops (and the tasks the adapter starts) name the platform in their log lines.
        with log_context(platform=self.adapter.platform):
            deliveries = asyncio.create_task(self._deliver_forever(), name=self.consumer)
            try:
                if receive_after is None or await receive_after:
                    if self.watchdog is not None:
                        # Silence counts from here: a gateway standing by hears nothing.
                        self.watchdog.watch(self.adapter.platform)
                    await self.adapter.run(self.publish)
            finally:
                await self._finish_begun()
                await cancel_and_wait(deliveries)

    async def stop(self) -> None:
        """Ask the adapter to stop; `run()` returns once it has."""
        self._stopping.set()
        await self.adapter.stop()

    async def _finish_begun(self) -> None:
        """Take nothing more; let the deliveries being shown be acked (the rest goes back).

        Without this, a chat that ends right after its answer is shown (`switchboard chat`
        with piped input) cancelled the answer's ack, and the next run showed it again."""
        self._stopping.set()
        if self._draining:
            await asyncio.wait(set(self._draining), timeout=_FINISH_GRACE)

    async def _deliver_forever(self) -> None:
        try:
            await self._receive_forever()
        finally:
            for task in list(self._draining):
                await cancel_and_wait(task)

    async def _receive_forever(self) -> None:
        # Not once stopping: the adapter may be closing its HTTP client, and a delivery taken
        # then fails at once, comes straight back, and is dead-lettered within milliseconds
        # (seen under SIGTERM with answers streaming). What is left is for the next gateway.
        while not self._stopping.is_set():
            await self._held.acquire()
            try:
                delivery = await keep_trying(
                    self.readiness,
                    self._delivery,
                    lambda: self.bus.receive(self._queue, consumer=self.consumer, timeout=_WAIT),
                )
            except Exception as exc:
                self._held.release()
                # Nothing may end this loop but `run()` finishing: a gateway that stops
                # delivering while it keeps polling is worse than one that is down.
                log.exception("the %s delivery loop failed; carrying on", self.adapter.platform)
                self.readiness.down(self._delivery, f"{type(exc).__name__}: {exc}"[:200])
                await asyncio.sleep(_AFTER_A_FAULT)
                continue
            except BaseException:
                self._held.release()
                raise
            if delivery is None:
                self._held.release()
                continue
            if self._stopping.is_set():  # taken while the stop came: for the next gateway
                await self._give_back(deque([delivery]))
                break
            lane = _lane(delivery)
            waiting = self._lanes.get(lane)
            if waiting is not None:
                waiting.append(delivery)  # shown after the chat's earlier ones
                continue
            self._lanes[lane] = deque([delivery])
            task = asyncio.create_task(self._drain(lane), name=f"{self.consumer} {lane}")
            self._draining.add(task)
            task.add_done_callback(self._draining.discard)

    async def _drain(self, lane: str) -> None:
        """Show one chat's deliveries one at a time until none is left."""
        waiting = self._lanes[lane]
        try:
            while waiting:
                if self._stopping.is_set():
                    # What this gateway has not begun goes back for the next one, in order.
                    await self._give_back(waiting)
                    break
                delivery = waiting[0]
                try:
                    await self._deliver(delivery)
                except Exception as exc:
                    log.exception("the %s delivery loop failed; carrying on", self.adapter.platform)
                    self.readiness.down(self._delivery, f"{type(exc).__name__}: {exc}"[:200])
                    await asyncio.sleep(_AFTER_A_FAULT)
                waiting.popleft()
                self._held.release()
        finally:
            # Cancelled: what is left is not acked and comes back after its lease.
            for _ in waiting:
                self._held.release()
            waiting.clear()
            del self._lanes[lane]

    async def _give_back(self, waiting: deque[Delivery]) -> None:
        """Return a stopping gateway's deliveries not begun to the queue, oldest first."""
        while waiting:
            delivery = waiting[0]
            await self._settle(delivery, done=False)
            waiting.popleft()
            self._held.release()

    async def _settle(self, delivery: Delivery, *, done: bool) -> None:
        """Ack (or nack) the delivery, trying again until the bus answers.

        An entry that could not be acked before its lease ran out comes back; showing it again
        is harmless (the reply records skip what was shown).
        """
        await keep_trying(self.readiness, self._delivery, delivery.ack if done else delivery.nack)

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.delivered(self.adapter.platform, outcome)
        # A rate limit waited out or a chat that refuses for good says nothing of the platform.
        if self.watchdog is not None and outcome in _WATCHED:
            self.watchdog.delivered(self.adapter.platform, ok=outcome == "delivered")

    async def _deliver(self, delivery: Delivery) -> None:
        """Show one delivery and settle it; one that carries a trace context, under a
        `deliver` span of that trace (`core/tracing.py`)."""
        outbound = delivery.envelope
        if not isinstance(outbound, Outbound):
            log.error("dropping a %s found on %s", type(outbound).__name__, self._queue)
            await self._settle(delivery, done=True)
            return
        if outbound.traceparent is None:
            await self._show(delivery, outbound)
            return
        with span(
            "deliver",
            kind=SpanKind.CONSUMER,
            parent=handed_over(outbound.traceparent),
            attributes={
                "switchboard.platform": outbound.address.platform,
                "switchboard.kind": outbound.kind,
                "switchboard.attempt": delivery.attempt,
            },
        ):
            await self._show(delivery, outbound)

    async def _show(self, delivery: Delivery, outbound: Outbound) -> None:
        waits = 0
        while True:
            try:
                await self.adapter.deliver(outbound)
            except ChannelError as exc:
                if (
                    exc.retry_after
                    and not exc.permanent
                    and outbound.kind not in _EPHEMERAL
                    and delivery.attempt + waits < self.max_deliveries
                ):
                    # A rate limit: wait it out in this chat's lane (other chats go on), and
                    # try again in place, so the chat's later deliveries stay behind this one.
                    waits += 1
                    self._count("retried")
                    log.info(
                        "delivery to %s rate limited (%s); trying again in %.1f s",
                        outbound.address.session_key,
                        exc,
                        exc.retry_after,
                    )
                    await asyncio.sleep(min(exc.retry_after, _MAX_RETRY_AFTER))
                    continue
                await self._refused(delivery, outbound, exc)
                return
            except Exception as exc:
                self._count("failed")
                log.exception("adapter %s failed to deliver %s", self.adapter.platform, outbound.id)
                if outbound.kind not in _EPHEMERAL and delivery.attempt >= self.max_deliveries:
                    reason = f"{type(exc).__name__}: {exc}"
                    await self._report(outbound, "dead_lettered", delivery.attempt, reason=reason)
                await self._settle(delivery, done=outbound.kind in _EPHEMERAL)
                return
            break
        self._count("delivered")
        if outbound.source is not None:
            await self._report(
                outbound, "delivered", delivery.attempt, message_id=await self._message_id(outbound)
            )
        await self._settle(delivery, done=True)

    async def _refused(self, delivery: Delivery, outbound: Outbound, exc: ChannelError) -> None:
        """Settle a delivery the platform refused."""
        if exc.permanent:
            self._count("gave_up")
            log.warning("gave up a %s for %s: %s", outbound.kind, outbound.address.session_key, exc)
            await self._report(outbound, "failed", delivery.attempt, reason=str(exc))
            await self._settle(delivery, done=True)
            return
        if outbound.kind in _EPHEMERAL:
            self._count("dropped")
            log.info("dropped %s for %s: %s", outbound.kind, outbound.address.session_key, exc)
            await self._settle(delivery, done=True)
            return
        self._count("retried")
        if self.watchdog is not None:
            self.watchdog.delivered(self.adapter.platform, ok=False)
        log.warning(
            "delivery to %s failed (attempt %d): %s",
            outbound.address.session_key,
            delivery.attempt,
            exc,
        )
        if delivery.attempt >= self.max_deliveries:
            await self._report(outbound, "dead_lettered", delivery.attempt, reason=str(exc))
        await self._settle(delivery, done=False)

    async def _report(
        self,
        outbound: Outbound,
        status: ReceiptStatus,
        attempt: int,
        *,
        reason: str = "",
        message_id: str | None = None,
    ) -> None:
        """Put the receipt of a proactive delivery on the `receipts` queue.

        Only for outbounds with a `source`. A receipt the bus refuses is logged, not retried:
        the delivery itself is done, and the run stays `pending` rather than the loop stalling.
        """
        if outbound.source is None:
            return
        receipt = Receipt(
            outbound=outbound,
            status=status,
            platform_message_id=message_id,
            reason=reason[:500],
            attempt=attempt,
        )
        try:
            await self.bus.enqueue(RECEIPTS, receipt)
        except BusError as exc:
            log.warning("could not report %s of %s: %s", status, outbound.id, exc)

    async def _message_id(self, outbound: Outbound) -> str | None:
        """The platform id of the first message showing `outbound`, if its record has one."""
        if self.replies is None:
            return None
        try:
            record = await self.replies.get(outbound.record_key)
        except (ChannelError, StoreError) as exc:
            log.info("no message id for the receipt of %s: %s", outbound.id, exc)
            return None
        if record is None or not record.messages:
            return None
        return record.messages[0].message_id


def _lane(delivery: Delivery) -> str:
    """The chat a delivery is for: its lane (deliveries of one chat are shown in order)."""
    outbound = delivery.envelope
    if isinstance(outbound, Outbound):
        address = outbound.address
        return f"{address.bot}:{address.chat}"
    return ""
