"""The one coalescer of a streamed answer: model text in, `delta` pieces out, paced per platform.

A piece is the whole answer so far with the next sequence number, so whichever gateway takes
it shows it, or skips it as older than what is shown (`channels/streaming.py`). Pieces go out
at most once per the platform's edit interval (`StreamPolicy.interval`); text that arrives
inside an interval goes out when it ends, even if the model then pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["ReplyStream", "StreamPolicy"]

log = logging.getLogger(__name__)

SendPiece = Callable[[str, int], Awaitable[None]]
"""`send(text so far, seq)`: put one piece of the reply on the platform's queue."""


@dataclass(frozen=True)
class StreamPolicy:
    """How a platform shows a turn while it runs."""

    # Seconds between two edits of a streamed reply (0: every piece at once).
    interval: float
    # Whether short notes of tool activity (`progress`) are shown at all.
    shows_progress: bool
    # Whether a reply's final text is shown in the messages its pieces were shown in (a chat
    # platform edits them): a stopped answer then keeps its text with a line saying it was
    # stopped; elsewhere (the terminal, the web page) a notice follows the pieces.
    edits_in_place: bool = False


class ReplyStream:
    """One streamed reply: `add` model text, `flush` before something else is shown."""

    def __init__(
        self, send: SendPiece, interval: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._text = ""
        self._sent = 0  # how much of the text the last piece carried
        self._seq = 0
        self._last = -interval
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def text(self) -> str:
        """The whole answer so far (sent or not)."""
        return self._text

    @property
    def next_seq(self) -> int:
        """A sequence number newer than every piece sent (for the final text)."""
        return self._seq + 1

    async def add(self, piece: str) -> None:
        """More text: sent now if the last piece is `interval` old, else when it is."""
        self._text += piece
        wait = self._last + self._interval - self._clock()
        if wait <= 0:
            await self.flush()
        elif self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_later(wait))

    async def flush(self) -> None:
        """Send the text so far if it grew since the last piece."""
        async with self._lock:
            self._last = self._clock()
            if len(self._text) == self._sent:
                return
            self._sent = len(self._text)
            self._seq += 1
            await self._send(self._text, self._seq)

    async def close(self) -> None:
        """Drop a pending piece (the final text follows, or the turn was abandoned)."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer

    async def _flush_later(self, wait: float) -> None:
        while True:
            await asyncio.sleep(wait)
            try:
                await self.flush()
            except Exception as exc:
                # A piece is expendable: the next one or the final text shows the answer.
                log.info("could not send streamed text: %s", exc)
                return
            if len(self._text) == self._sent:
                return
            # Text added while that piece was on its way (`add` saw this task still running)
            # goes out one interval later.
            wait = max(0.0, self._last + self._interval - self._clock())
