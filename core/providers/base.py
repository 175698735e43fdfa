"""The `Provider` protocol: one streaming model call, in core types only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from core.events import Finished, ModelEvent, StopReason, TextDelta
from core.messages import Derives, Message, ToolCall, Usage

__all__ = ["Completion", "ModelRequest", "Provider", "ToolSpec", "complete"]


class ToolSpec(Derives, BaseModel):
    """What the model is told about a tool: its name, purpose and argument schema.

    A tool makes its spec once and every call offers it again, so what is derived from it
    (its token estimate, each provider's JSON of it) is kept with it (`derived`).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    """Everything a provider needs for one call."""

    model_config = ConfigDict(frozen=True)

    model: str
    system: str = ""
    # Context for this turn only (memory snippets), sent after `system` so the stable prompt
    # before it keeps hitting provider caches.
    turn_context: str = ""
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
    # False asks for the whole answer in one response: the one call `ReliableProvider` makes
    # when a stream failed before its first event. Providers without such a call stream.
    stream: bool = True


class Completion(BaseModel):
    """A whole model answer, gathered from a stream."""

    model_config = ConfigDict(frozen=True)

    text: str
    tool_calls: list[ToolCall]
    stop_reason: StopReason
    usage: Usage


@runtime_checkable
class Provider(Protocol):
    """A language model behind one API. Vendor formats never leave the implementation."""

    @property
    def name(self) -> str:
        """The registry key: `anthropic`, `openai`, `demo`..."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield text deltas and tool calls as they arrive, then exactly one `Finished`.

        Raises `ProviderError` (classified) when the call fails.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; the provider is not used afterwards."""
        ...


async def complete(provider: Provider, request: ModelRequest) -> Completion:
    """Run one call to the end and gather its events."""
    text: list[str] = []
    calls: list[ToolCall] = []
    finished = Finished()
    async for event in provider.stream(request):
        match event:
            case TextDelta(text=chunk):
                text.append(chunk)
            case ToolCall():
                calls.append(event)
            case Finished():
                finished = event
    return Completion(
        text="".join(text),
        tool_calls=calls,
        stop_reason=finished.stop_reason,
        usage=finished.usage,
    )
