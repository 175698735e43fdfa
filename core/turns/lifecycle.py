"""`Lifecycle`: a turn's lifecycle events fanned out on the `events` topic, best effort."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from core.bus.base import Bus
from core.bus.names import EVENTS
from core.envelopes import EventEnvelope
from core.events import LIFECYCLE_NAMES, AgentEvent, Cancelled, RunCompleted, RunFailed, RunStarted
from core.redact import Redactor
from core.runtime import ChannelContext

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)


class Lifecycle:
    """Publishes `agent.run.*` and `tool.*` events, with each run's duration at its end.

    Every reader of the `events` topic sees them, so their data (reply text, tool arguments
    and output) is scrubbed of secrets first.

    The turn does not wait for them: one sender task per process publishes them in order while
    the turn goes on, so an event leaves together with what the turn sends next on the bus
    (on Redis, the same round trip: core/redis_client.py) instead of costing one of its own.
    """

    def __init__(self, bus: Bus, redactor: Redactor) -> None:
        self.bus = bus
        self._redact = redactor
        self._started: dict[str, float] = {}
        self._outgoing: deque[EventEnvelope] = deque()
        # The sender, while there is something to send (it ends when the queue is empty).
        self._sender: asyncio.Task[None] | None = None

    async def publish(
        self, event: AgentEvent, session_id: str, run_id: str, context: ChannelContext
    ) -> None:
        """Fan `event` out if it is a lifecycle event, after the ones before it; a failure is
        logged, never raised. Returns once it is queued (see `sent`)."""
        name = LIFECYCLE_NAMES.get(type(event))
        if name is None:
            return
        data = self._redact.data(event.model_dump(mode="json", exclude={"kind"}))
        data["platform"] = context.platform
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
            envelope = self._outgoing.popleft()
            try:
                await self.bus.publish(EVENTS, envelope)
            except Exception:
                # Lifecycle fan-out is best effort; the turn itself must not fail for it.
                log.warning(
                    "could not publish %s for run %s", envelope.name, envelope.run_id, exc_info=True
                )
