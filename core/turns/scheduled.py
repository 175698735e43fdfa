"""`ScheduledRuns`: a schedule's run, answered quietly and delivered per its policy."""

from __future__ import annotations

import asyncio
import logging
import time

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Inbound, Outbound
from core.events import RunCompleted, RunFailed
from core.scheduling.book import ScheduleBook
from core.store.base import Fence, Store
from core.turns.turn import Contexts, TurnRunner

__all__ = ["ScheduledRuns"]

log = logging.getLogger(__name__)


class ScheduledRuns:
    """Runs `Inbound(origin="scheduled")` work and records each run's outcome in the book."""

    def __init__(
        self, *, bus: Bus, store: Store, book: ScheduleBook, contexts: Contexts, turns: TurnRunner
    ) -> None:
        self.bus = bus
        self.store = store
        self.book = book
        self.contexts = contexts
        self.turns = turns

    async def run(self, inbound: Inbound, *, cancel: asyncio.Event, fence: Fence | None) -> None:
        """Run the schedule's prompt in its session; tell its chat what the policy says."""
        if inbound.schedule_id is None or inbound.run_id is None:
            log.error("a scheduled run without its schedule or run id; dropped")
            return
        context = self.contexts.for_schedule(inbound)
        session = await self.store.current_session(inbound.session_key)
        started = time.monotonic()
        outcome = await self.turns.run(
            inbound, context, session.id, cancel=cancel, fence=fence, checkpoint=None, shown=False
        )
        output, error, cost = "", "cancelled", None
        if isinstance(outcome, RunCompleted):
            output, error, cost = outcome.text, "", outcome.cost_usd
        elif isinstance(outcome, RunFailed):
            error = outcome.detail or outcome.message
        notes = await self.book.finish(
            inbound.schedule_id,
            inbound.run_id,
            succeeded=isinstance(outcome, RunCompleted),
            output=output,
            error=error,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            cost_usd=cost,
        )
        for number, note in enumerate(notes):
            await self.bus.enqueue(
                outbound_queue(note.address.platform),
                Outbound(kind="notification", address=note.address, text=note.text),
                dedupe_id=f"run:{inbound.run_id}:{number}",
            )
