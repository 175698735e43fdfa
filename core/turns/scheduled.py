"""`ScheduledRuns`: a schedule's run, answered quietly and delivered per its policy."""

from __future__ import annotations

import asyncio
import logging
import time

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Inbound, NotificationSource, Outbound
from core.events import RunCompleted, RunFailed
from core.metrics import Metrics
from core.runtime import ChannelContext
from core.scheduling.book import ScheduleBook
from core.scheduling.brief import scheduled_brief
from core.scheduling.tools import describe_cadence
from core.store.base import Fence, Store
from core.store.log import new_session_id
from core.turns.lifecycle import outcome_name
from core.turns.turn import Contexts, Turn, TurnRunner

__all__ = ["ScheduledRuns"]

log = logging.getLogger(__name__)


class ScheduledRuns:
    """Runs `Inbound(origin="scheduled")` work and records each run's outcome in the book."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        book: ScheduleBook,
        contexts: Contexts,
        turns: TurnRunner,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics
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
        # The run goes to its session's current session, made with the run's first turn, on
        # the model the chat it answers in chose (`/model`), as the chat's own turns are.
        chat = await self.store.find_current_session(inbound.address.session_key)
        turn = Turn(
            inbound=inbound,
            context=await self._context(inbound),
            session_id=new_session_id(),
            model=None if chat is None else chat.model,
            shown=False,
        )
        started = time.monotonic()
        outcome = await self.turns.run(turn, cancel=cancel, fence=fence)
        output, error, cost = "", "cancelled", None
        if isinstance(outcome, RunCompleted):
            output, error, cost = outcome.text, "", outcome.cost_usd
        elif isinstance(outcome, RunFailed):
            error = outcome.detail or outcome.message
        if self.metrics is not None:
            self.metrics.schedule_runs.labels(outcome=outcome_name(outcome)).inc()
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
                Outbound(
                    kind="notification",
                    address=note.address,
                    text=note.text,
                    source=NotificationSource(
                        kind="schedule" if note.kind == "answer" else "alert",
                        name=inbound.schedule_id,
                        run_id=inbound.run_id,
                    ),
                ),
                dedupe_id=f"run:{inbound.run_id}:{number}",
            )

    async def _context(self, inbound: Inbound) -> ChannelContext:
        """The run's context, with the prompt section that says what a scheduled run is."""
        assert inbound.schedule_id is not None
        context = self.contexts.for_schedule(inbound)
        schedule = await self.book.store.get_schedule(inbound.schedule_id)
        brief = scheduled_brief(
            schedule_id=inbound.schedule_id,
            owner=inbound.owner or "cli",
            chat=str(inbound.address),
            notify=inbound.notify,
            cadence=describe_cadence(schedule.cadence) if schedule is not None else None,
        )
        return context.model_copy(update={"schedule_brief": brief})
