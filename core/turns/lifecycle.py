"""`Lifecycle`: a turn's lifecycle events fanned out on the `events` topic, best effort; and,
from the same events, the turn's metrics and its log lines (one at info level per turn, one
at debug level per tool call)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from core.bus.base import Bus
from core.bus.names import EVENTS
from core.envelopes import EventEnvelope
from core.errors import Unavailable
from core.events import (
    LIFECYCLE_NAMES,
    AgentEvent,
    Cancelled,
    ChildEvent,
    Degraded,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolFinished,
)
from core.logcontext import log_context
from core.metrics import Metrics
from core.outages import Patience
from core.redact import Redactor
from core.runtime import ChannelContext

__all__ = ["Lifecycle", "outcome_name"]

log = logging.getLogger(__name__)


class Lifecycle:
    """Publishes `agent.run.*` and `tool.*` events, with each run's duration at its end.

    Every reader of the `events` topic sees them, so their data (reply text, tool arguments
    and output) is scrubbed of secrets first.

    The turn does not wait for them: one sender task per process publishes them in order while
    the turn goes on.
    """

    def __init__(
        self,
        bus: Bus,
        redactor: Redactor,
        metrics: Metrics | None = None,
        *,
        patience: Patience | None = None,
    ) -> None:
        """`patience` logs an outage of the bus once (events are not held back for it)."""
        self.bus = bus
        self.patience = patience or Patience()
        self._redact = redactor
        self._started: dict[str, float] = {}
        self.metrics = metrics
        # Runs still waiting for their first streamed text, and when each began.
        self._awaiting_text: dict[str, float] = {}
        self._outgoing: deque[EventEnvelope] = deque()
        # The sender, while there is something to send (it ends when the queue is empty).
        self._sender: asyncio.Task[None] | None = None

    async def publish(
        self, event: AgentEvent, session_id: str, run_id: str, context: ChannelContext
    ) -> None:
        """Fan `event` out if it is a lifecycle event, after the ones before it; a failure is
        logged, never raised. Returns once it is queued (see `sent`).

        A sub-agent's event (`ChildEvent`) goes out under its inner event's name, with the
        child's run and session, and `parent_run_id` and `depth` in its data; it counts to no
        turn metric (the parent's turn does)."""
        nesting: dict[str, object] = {}
        if isinstance(event, ChildEvent):
            nesting = {"parent_run_id": event.parent_run_id, "depth": event.depth}
            session_id, run_id, event = event.session_id, event.run_id, event.event
        else:
            self._observe(event, run_id, context)
        name = LIFECYCLE_NAMES.get(type(event))
        if name is None:
            return
        data = self._redact.data(event.model_dump(mode="json", exclude={"kind"}))
        data["platform"] = context.platform
        data.update(nesting)
        now = time.monotonic()
        if isinstance(event, RunStarted):
            self._started[run_id] = now
        elif isinstance(event, RunCompleted | RunFailed | Cancelled):
            started = self._started.pop(run_id, None)
            if started is not None:
                data["duration_ms"] = round((now - started) * 1000, 1)
        self._outgoing.append(
            EventEnvelope(
                name=name,
                session_id=session_id,
                run_id=run_id,
                session_key=context.session_key,
                data=data,
            )
        )
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())

    async def sent(self) -> None:
        """Wait until every event queued so far has been published (or given up on)."""
        while self._sender is not None and not self._sender.done():
            await asyncio.shield(self._sender)

    async def _send(self) -> None:
        while self._outgoing:
            await self._publish_one(self._outgoing.popleft())

    async def _publish_one(self, envelope: EventEnvelope) -> None:
        try:
            await self.bus.publish(EVENTS, envelope)
            self.patience.worked()
        except Unavailable as exc:
            # Lost with the outage (logged once for it): the turn goes on without it.
            self.patience.failed(exc)
        except Exception:
            # Lifecycle fan-out is best effort; the turn itself must not fail for it.
            log.warning(
                "could not publish %s for run %s", envelope.name, envelope.run_id, exc_info=True
            )

    def _observe(self, event: AgentEvent, run_id: str, context: ChannelContext) -> None:
        """The turn's metrics and log lines, from its events."""
        now = time.monotonic()
        metrics = self.metrics
        match event:
            case RunStarted():
                self._awaiting_text[run_id] = now
            case TextDelta() if run_id in self._awaiting_text:
                began = self._awaiting_text.pop(run_id)
                if metrics is not None:
                    metrics.first_token_seconds.labels(platform=context.platform).observe(
                        now - began
                    )
            case Degraded(model=model):
                if metrics is not None:
                    metrics.turns_degraded.labels(platform=context.platform).inc()
                with log_context(run=run_id):
                    log.info("the turn runs on the cheaper model %s", model)
            case ToolFinished(name=tool, is_error=failed, duration_ms=ms):
                if metrics is not None:
                    outcome = "error" if failed else "ok"
                    metrics.tool_calls.labels(tool=tool, outcome=outcome).inc()
                with log_context(run=run_id):
                    log.debug("tool %s %s in %.0f ms", tool, "failed" if failed else "ran", ms)
            case RunCompleted() | RunFailed() | Cancelled():
                self._awaiting_text.pop(run_id, None)
                start = self._started.get(run_id)
                seconds = None if start is None else now - start
                outcome = outcome_name(event)
                if metrics is not None:
                    metrics.turn_ended(context.platform, context.mode.name, outcome, seconds)
                with log_context(run=run_id):
                    log.info("%s", _turn_line(event, outcome, seconds, context))


def outcome_name(event: RunCompleted | RunFailed | Cancelled | None) -> str:
    """`completed`, `failed` or `cancelled` (a turn that stopped short counts as cancelled)."""
    if isinstance(event, RunCompleted):
        return "completed"
    return "failed" if isinstance(event, RunFailed) else "cancelled"


def _turn_line(
    event: RunCompleted | RunFailed | Cancelled,
    outcome: str,
    seconds: float | None,
    context: ChannelContext,
) -> str:
    """`turn completed: alice (telegram, safe-chat) in 1.2s, 130+42 tokens, $0.0003`."""
    who = context.user_name or context.user_id or "someone"
    if context.scheduled:
        who = f"schedule for {who}"
    line = f"turn {outcome}: {who} ({context.platform}, {context.mode.name})"
    if seconds is not None:
        line += f" in {seconds:.1f}s"
    if isinstance(event, RunCompleted):
        usage = event.usage
        cost = "cost unknown" if event.cost_usd is None else f"${event.cost_usd:.6f}"
        line += f", {usage.input_tokens}+{usage.output_tokens} tokens, {cost}"
    elif isinstance(event, RunFailed):
        line += f", {event.failure}"
    return line
