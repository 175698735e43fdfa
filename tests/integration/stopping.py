"""A model that starts an answer and then goes on writing until it is stopped: the turn a
`/stop` test stops. Shared by the per-platform tests of `/stop` and the Stop button."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core.events import Finished, ModelEvent, TextDelta
from core.providers.base import ModelRequest

__all__ = ["OPENING", "EndlessProvider"]

OPENING = "Once upon a time"


class EndlessProvider:
    """The first call streams `OPENING` and then nothing more until it is cancelled (noted in
    `cancelled`); every later call answers `You said: <the last message>`.

    A test sees the opening arrive at the platform fake, stops the turn, and sees the call
    cancelled: no clock involved.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.cancelled = asyncio.Event()

    @property
    def name(self) -> str:
        return "endless"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The opening and a wait for ever (first call), or an echo of the last message."""
        self.calls += 1
        if self.calls == 1:
            yield TextDelta(text=OPENING)
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        said = request.messages[-1].text
        yield TextDelta(text=f"You said: {said}")
        yield Finished(stop_reason="end_turn")
