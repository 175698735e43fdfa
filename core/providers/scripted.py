"""`ScriptedProvider`: a provider whose answers are given in advance, for tests and benchmarks.

Each call takes the next item of the script: a list of model events to stream, an exception to
raise, or a function of the request returning either. Every request is recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from core.events import Finished, ModelEvent, TextDelta
from core.messages import ToolCall, Usage
from core.providers.base import ModelRequest

__all__ = ["Reply", "ScriptStep", "ScriptedProvider", "text_reply", "tool_reply"]

Reply = Sequence[ModelEvent]
ScriptStep = Reply | BaseException | Callable[[ModelRequest], Reply | Awaitable[Reply]]


def text_reply(text: str, *, usage: Usage | None = None) -> list[ModelEvent]:
    """A final answer streamed as one delta."""
    return [TextDelta(text=text), Finished(stop_reason="end_turn", usage=usage or Usage())]


def tool_reply(*calls: ToolCall, text: str = "") -> list[ModelEvent]:
    """An answer that asks for tools."""
    events: list[ModelEvent] = [TextDelta(text=text)] if text else []
    events.extend(calls)
    events.append(Finished(stop_reason="tool_use"))
    return events


class ScriptedProvider:
    """Plays a script, one step per call; `requests` keeps what each call was sent."""

    def __init__(self, script: Iterable[ScriptStep], *, name: str = "scripted") -> None:
        self._script = list(script)
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the next step of the script."""
        self.requests.append(request)
        if not self._script:
            raise AssertionError(f"script exhausted after {len(self.requests) - 1} calls")
        step = self._script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            produced = step(request)
            reply = await produced if isinstance(produced, Awaitable) else produced
        else:
            reply = step
        for event in reply:
            await asyncio.sleep(0)
            yield event
