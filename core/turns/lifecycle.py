"""`Lifecycle`: a turn's lifecycle events fanned out on the `events` topic, best effort."""

from __future__ import annotations

import logging
import time

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
    """

    def __init__(self, bus: Bus, redactor: Redactor) -> None:
        self.bus = bus
        self._redact = redactor
        self._started: dict[str, float] = {}

    async def publish(
        self, event: AgentEvent, session_id: str, run_id: str, context: ChannelContext
    ) -> None:
        """Fan `event` out if it is a lifecycle event; a failure is logged, never raised."""
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
        try:
            await self.bus.publish(
                EVENTS,
                EventEnvelope(
                    name=name,
                    session_id=session_id,
                    run_id=run_id,
                    session_key=context.session_key,
                    data=data,
                ),
            )
        except Exception:
            # Lifecycle fan-out is best effort; the turn itself must not fail for it.
            log.warning("could not publish %s for run %s", name, run_id, exc_info=True)
