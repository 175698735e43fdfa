"""Shared pieces of the provider integration tests: requests, runtimes and event helpers.

The providers are the real ones (official SDKs inside); only the network peer is fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from core.events import AgentEvent, ModelEvent, RunCompleted, RunFailed, TextDelta
from core.messages import ImagePart, Message
from core.modes import FULL
from core.pricing import PriceBook
from core.providers.base import ModelRequest, Provider, ToolSpec
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.store.base import Store
from core.tools import ToolRegistry, builtin_tools

E = TypeVar("E")

# A model with a price in `core.pricing.PRICES`: claude-sonnet-4-6 costs $3 / $15 per million
# input / output tokens, $0.30 to read and $3.75 to write the cache.
SONNET = "claude-sonnet-4-6"
# gpt-4o-mini: $0.15 / $0.60 per million input / output tokens, $0.075 to read the cache.
GPT = "gpt-4o-mini"

# A 10,000-character answer: numbered words, ten to a line, so no two 40-character pieces are
# equal and a lost, doubled or reordered chunk shows.
LONG_TEXT = "".join(f"{i:05d}" + ("\n" if i % 10 == 9 else " ") for i in range(1667))[:10_000]

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01"
NOW = datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)


def fixed_clock() -> datetime:
    """The same moment for every turn, so system prompts are comparable across turns."""
    return NOW


def calculator_spec() -> ToolSpec:
    """The real calculator tool as the model is told about it."""
    return next(t.spec for t in builtin_tools() if t.name == "calculator")


def request(model: str, *messages: Message, **options: Any) -> ModelRequest:
    """A request with the given messages (one "hi" when none)."""
    return ModelRequest(model=model, messages=list(messages) or [Message.user("hi")], **options)


def image_message() -> Message:
    """A user turn with text and a PNG."""
    return Message.user("look", [ImagePart(media_type="image/png", data=PNG)])


async def collect(provider: Provider, model_request: ModelRequest) -> list[ModelEvent]:
    """Every event of one streamed call."""
    return [event async for event in provider.stream(model_request)]


def text_of(events: Iterable[ModelEvent | AgentEvent]) -> str:
    """The streamed text deltas joined."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def of_type(events: Iterable[Any], kind: type[E]) -> list[E]:
    """The events of one class, in order."""
    return [e for e in events if isinstance(e, kind)]


def make_runtime(
    provider: Provider, model: str, store: Store, *, limits: RuntimeLimits | None = None
) -> AgentRuntime:
    """A runtime with the real built-in tools and price table."""
    return AgentRuntime(
        provider=provider,
        model=model,
        tools=ToolRegistry(builtin_tools()),
        store=store,
        limits=limits,
        cost=PriceBook().cost,
        clock=fixed_clock,
    )


CONTEXT = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")


async def run_turn(
    runtime: AgentRuntime, session_id: str, message: Message | str
) -> list[AgentEvent]:
    """One turn's events; the last is RunCompleted, RunFailed or Cancelled."""
    user = Message.user(message) if isinstance(message, str) else message
    return [event async for event in runtime.run(session_id, user, CONTEXT)]


def completed(events: list[AgentEvent]) -> RunCompleted:
    """The RunCompleted that ended a turn (fails with the events otherwise)."""
    assert isinstance(events[-1], RunCompleted), events[-1]
    return events[-1]


def failed(events: list[AgentEvent]) -> RunFailed:
    """The RunFailed that ended a turn (fails with the events otherwise)."""
    assert isinstance(events[-1], RunFailed), events[-1]
    return events[-1]


def canonical(value: Any) -> str:
    """JSON with sorted keys: byte-identical for equal values."""
    return json.dumps(value, sort_keys=True)


class RecordingSleep:
    """A `sleep` for `ReliableProvider` that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
