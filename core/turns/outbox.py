"""`Outbox`: what a worker sends about one `Inbound` to its platform's outbound queue.

A platform this process shows itself (the terminal of `switchboard chat`) takes what is
ephemeral (typing, progress, stream pieces) straight from the outbox, not through the queue:
decision 0016.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final, Protocol

from opentelemetry.trace import SpanKind

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Inbound, Outbound, OutboundKind
from core.errors import ConfigError
from core.outages import Patience
from core.tracing import span, traceparent
from core.turns.stream import StreamPolicy

__all__ = ["EPHEMERAL_KINDS", "Display", "Outbox"]

log = logging.getLogger(__name__)

EPHEMERAL_KINDS: Final[frozenset[OutboundKind]] = frozenset({"typing", "progress", "delta"})
"""What a chat may miss: the final text, or the next piece, shows the answer anyway."""


class Display(Protocol):
    """A platform shown by this very process (the terminal chat's adapter)."""

    async def deliver(self, outbound: Outbound) -> None:
        """Show `outbound` in its chat."""
        ...


class Outbox:
    """Sends deliveries answering an inbound message, per each platform's `StreamPolicy`."""

    def __init__(
        self,
        bus: Bus,
        streaming: Mapping[str, StreamPolicy],
        *,
        patience: Patience | None = None,
    ) -> None:
        """`patience`: how a delivery waits out an outage of the bus (the worker's turns
        share one, `core/outages.py`)."""
        self.bus = bus
        self._streaming = dict(streaming)
        self.patience = patience or Patience()
        self._shown_here: dict[str, Display] = {}

    def show_here(self, platform: str, display: Display) -> None:
        """Show `platform`'s ephemeral deliveries (`EPHEMERAL_KINDS`) with `display`, in this
        process, instead of putting them on the platform's queue; what must outlive a crash
        (final answers, notices, questions, files) still goes through the queue."""
        self._shown_here[platform] = display

    def policy(self, platform: str) -> StreamPolicy:
        """How `platform` shows a running turn; `ConfigError` for a platform not configured."""
        try:
            return self._streaming[platform]
        except KeyError:
            known = ", ".join(sorted(self._streaming)) or "none"
            raise ConfigError(
                f"no stream policy for platform {platform!r} (known: {known})"
            ) from None

    async def send(
        self,
        inbound: Inbound,
        kind: OutboundKind,
        text: str,
        *,
        seq: int = 0,
        failed: bool = False,
    ) -> None:
        """One delivery about `inbound`, part of the reply keyed by its dedupe key.

        The final answer is enqueued under a dedupe id: a turn repeated by another worker
        after a crash does not reach the user twice. While the bus is away (Redis
        restarting) the delivery waits for it, within the patience's budget; sent twice
        (its first try landed, its answer lost), a final answer is kept once and a piece is
        shown once (pieces carry their sequence number).
        """
        final = kind in ("reply", "notice")
        outbound = Outbound(
            kind=kind,
            address=inbound.address,
            text=text,
            reply_to=inbound.id,
            reply_to_platform_id=inbound.platform_message_id,
            reply_key=inbound.dedupe_key,
            seq=seq,
            failed=failed,
        )
        display = self._shown_here.get(inbound.address.platform)
        if display is not None and kind in EPHEMERAL_KINDS:
            try:
                await display.deliver(outbound)
            except Exception as exc:
                # Expendable, as the gateway treats it: the next piece or the final text shows.
                log.info("could not show a %s: %s", kind, exc)
            return
        if kind in EPHEMERAL_KINDS:
            await self._enqueue(outbound, final=final, dedupe_key=inbound.dedupe_key)
            return
        # What stays in the chat is traced to its delivery (`core/tracing.py`); the stream's
        # pieces and typing would only crowd the trace.
        with span(
            "outbound enqueue",
            kind=SpanKind.PRODUCER,
            attributes={"switchboard.platform": inbound.address.platform, "switchboard.kind": kind},
        ):
            if (context := traceparent()) is not None:
                outbound = outbound.model_copy(update={"traceparent": context})
            await self._enqueue(outbound, final=final, dedupe_key=inbound.dedupe_key)

    async def _enqueue(self, outbound: Outbound, *, final: bool, dedupe_key: str) -> None:
        await self.patience(
            lambda: self.bus.enqueue(
                outbound_queue(outbound.address.platform),
                outbound,
                dedupe_id=f"{dedupe_key}:final" if final else None,
            )
        )
