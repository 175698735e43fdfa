"""`EventBuffer`: a turn's events on their way to its consumer, with a bound on what waits.

The model's stream is what can outrun a consumer (a slow chat platform, a stalled web page):
before the runtime reads the next piece of it, it waits for `room()`, so at most `size` events
wait and a slow consumer slows the turn (and, through TCP, the model's stream) instead of
growing memory. Events the turn makes between model calls (a step's tool requests and
results, its checkpoint, its end) are put without waiting: they are a handful per step, and a
tool's result must not wait on a reader to be stored. Text is never coalesced or dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque

from core.events import AgentEvent

__all__ = ["DEFAULT_STREAM_BUFFER_SIZE", "EventBuffer"]

DEFAULT_STREAM_BUFFER_SIZE = 256


class EventBuffer:
    """A FIFO of one turn's events (None ends it) whose producer waits at `size` waiting."""

    def __init__(self, size: int = DEFAULT_STREAM_BUFFER_SIZE) -> None:
        if size < 1:
            raise ValueError(f"an event buffer holds at least one event, not {size}")
        self.size = size
        self._events: deque[AgentEvent | None] = deque()
        # Set while something waits to be read; cleared when the buffer is empty.
        self._filled = asyncio.Event()
        # Set while fewer than `size` events wait.
        self._roomy = asyncio.Event()
        self._roomy.set()

    def __len__(self) -> int:
        return len(self._events)

    def put(self, event: AgentEvent | None) -> None:
        """Add `event` (None: the turn is over) without waiting."""
        self._events.append(event)
        self._filled.set()
        if len(self._events) >= self.size:
            self._roomy.clear()

    async def room(self) -> None:
        """Return once fewer than `size` events wait to be read."""
        await self._roomy.wait()

    async def get(self) -> AgentEvent | None:
        """The oldest event, once there is one."""
        await self._filled.wait()
        event = self._events.popleft()
        if not self._events:
            self._filled.clear()
        if len(self._events) < self.size:
            self._roomy.set()
        return event
