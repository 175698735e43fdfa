"""Extensions: an operator's code that can change a turn's input, prompt and messages
(docs/extensions.md).

`[hooks] input`, `before_agent_start` and `context` name Python callables as import paths, in
the same forms as the tool hooks (`core/tool_hooks.py`, whose loading, timeout and fail
open/closed this module reuses). Each callable, sync or async, takes a typed event and an
`ExtensionContext`, and returns its point's result or None (no change):

- `input(InputEvent, ctx)` before the person's message is stored: `InputResult(text=...)`
  replaces the text (the model and the history see the new one), `InputResult(reply=...)`
  answers it without a model call.
- `before_agent_start(AgentStartEvent, ctx)` once the system prompt is built:
  `AgentStartResult(system=...)` replaces it for this turn, `append=...` adds to it.
- `context(ContextEvent, ctx)` before each model call: `ContextResult(messages=[...])` is what
  that one request carries instead; the store keeps the conversation as it was.

The context gives the turn's usage and cost so far, and asks for things the runtime does
once the extension has returned: `abort(reason)` ends the turn as `/stop` does,
`request_compaction()` compacts the session before the next model call (or after the turn's
last one), `reload()` calls the reloader the `Extensions` were given.

An extension that raises, times out or answers something else fails like a tool hook: with
`fail = "closed"` the turn ends with `EXTENSION_FAILED`, with "open" it goes on unchanged.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from core.arrivals import Arrival, Arrivals
from core.events import Cancelled, RunFailed
from core.messages import Message, TextPart, Usage
from core.redact import Redactor
from core.tool_hooks import (
    FailMode,
    HookEntry,
    HookFailed,
    LoadedHook,
    TurnFacts,
    call_hook,
    load_point,
)
from core.turn_state import ChannelContext, TurnState

__all__ = [
    "EXTENSION_FAILED",
    "AgentStartEvent",
    "AgentStartResult",
    "ContextEvent",
    "ContextResult",
    "ExtensionContext",
    "ExtensionEvent",
    "ExtensionStop",
    "Extensions",
    "InputEvent",
    "InputResult",
    "Reloader",
    "load_extensions",
]

log = logging.getLogger(__name__)

EXTENSION_FAILED: Final = "I could not handle this message: one of this bot's extensions failed."
_R = TypeVar("_R", bound=BaseModel)
# What an extension is given besides the event (named in a bad signature's error).
_TAKES: Final = ("the event", "the context")

# What `ExtensionContext.reload()` calls (the profile's reload, wired in `bots/`).
Reloader = Callable[[], "Awaitable[object] | None"]


class ExtensionEvent(TurnFacts):
    """What every extension event says about the turn (the facts a tool hook's event has)."""

    run_id: str


class InputEvent(ExtensionEvent):
    """The person's message, before it is stored (`input`)."""

    text: str


class AgentStartEvent(ExtensionEvent):
    """The turn's system prompt, built, before the first model call (`before_agent_start`)."""

    system: str


class ContextEvent(ExtensionEvent):
    """The messages one model call is about to send (`context`), its window's share."""

    messages: list[Message]


class InputResult(BaseModel):
    """`text`: the message to store and answer instead; `reply`: the answer, no model call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str | None = Field(default=None, min_length=1)
    reply: str | None = Field(default=None, min_length=1)


class AgentStartResult(BaseModel):
    """`system`: this turn's system prompt instead; `append`: text added after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str | None = Field(default=None, min_length=1)
    append: str | None = Field(default=None, min_length=1)


class ContextResult(BaseModel):
    """The messages one model call sends instead (not stored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: list[Message] = Field(min_length=1)


class ExtensionStop(Exception):
    """Ends the turn from an extension point: its `final` event is the turn's last."""

    def __init__(self, reason: str, *, failed: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failed = failed

    def final(self, run_id: str) -> RunFailed | Cancelled:
        """The turn's last event: an abort is a cancel, a failure closed a failed turn."""
        if not self.failed:
            return Cancelled(run_id=run_id)
        return RunFailed(
            run_id=run_id, failure="internal", message=EXTENSION_FAILED, detail=self.reason
        )


class ExtensionContext:
    """What an extension may read of the turn and ask of it (acted on once it returns)."""

    def __init__(self, state: TurnState) -> None:
        self._state = state

    @property
    def usage(self) -> Usage:
        """The tokens of the turn's model calls so far."""
        return self._state.usage

    @property
    def cost_usd(self) -> float:
        """What the turn's model calls cost so far (calls of unknown price count nothing)."""
        return self._state.cost

    def abort(self, reason: str = "") -> None:
        """End the turn as `/stop` does, once the extension returns."""
        self._state.requests.abort = reason or "aborted by an extension"

    def request_compaction(self) -> None:
        """Compact the session before the next model call (or after the turn's last one)."""
        self._state.requests.compact = True

    def reload(self) -> None:
        """Reload the profile, once the extension returns (where the runtime can)."""
        self._state.requests.reload = True


class Extensions:
    """The operator's extensions, each point's called in the order configured; replacements
    compose (each extension sees what the one before returned)."""

    def __init__(
        self,
        input: Sequence[LoadedHook] = (),
        before_agent_start: Sequence[LoadedHook] = (),
        context: Sequence[LoadedHook] = (),
        *,
        redactor: Redactor | None = None,
        reload: Reloader | None = None,
    ) -> None:
        self.input = list(input)
        self.before_agent_start = list(before_agent_start)
        self.context = list(context)
        self.reload = reload
        self._redact = redactor or Redactor()

    def __bool__(self) -> bool:
        return bool(self.input or self.before_agent_start or self.context)

    async def on_input(
        self, message: Message, run_id: str, context: ChannelContext, state: TurnState
    ) -> Message:
        """The person's message as the `input` extensions leave it; one that answers it sets
        `state.requests.reply` (later ones are not asked)."""
        for hook in self.input:
            event = InputEvent(text=message.text, **_about(run_id, context, state))
            answer = await self._ask(hook, "input", event, InputResult, state)
            if answer is None:
                continue
            if answer.text is not None:
                message = _with_text(message, answer.text)
            if answer.reply is not None:
                state.requests.reply = answer.reply
                break
        return message

    def joining(
        self, arrivals: Arrivals | None, run_id: str, context: ChannelContext, state: TurnState
    ) -> Arrivals | None:
        """`arrivals` whose messages (those that join the running turn, `busy`) pass through
        the `input` extensions too; as they are when there are none."""
        if arrivals is None or not self.input:
            return arrivals
        return _JoinedInput(self, arrivals, run_id, context, state)

    async def on_agent_start(
        self, system: str, run_id: str, context: ChannelContext, state: TurnState
    ) -> str:
        """The turn's system prompt as the `before_agent_start` extensions leave it."""
        for hook in self.before_agent_start:
            event = AgentStartEvent(system=system, **_about(run_id, context, state))
            answer = await self._ask(hook, "before_agent_start", event, AgentStartResult, state)
            if answer is not None:
                system = answer.system if answer.system is not None else system
                system = f"{system}\n\n{answer.append}" if answer.append else system
        return system

    async def on_context(
        self,
        messages: list[Message],
        run_id: str,
        context: ChannelContext,
        state: TurnState,
    ) -> list[Message]:
        """What one model call sends, as the `context` extensions leave it."""
        for hook in self.context:
            event = ContextEvent(messages=messages, **_about(run_id, context, state))
            answer = await self._ask(hook, "context", event, ContextResult, state)
            if answer is not None:
                messages = list(answer.messages)
        return messages

    async def _ask(
        self,
        hook: LoadedHook,
        point: str,
        event: ExtensionEvent,
        result: type[_R],
        state: TurnState,
    ) -> _R | None:
        """One extension's answer (None: no change, or it failed open); then what it asked
        of the turn is done. Raises `ExtensionStop` for an abort or a failure closed."""
        ctx = ExtensionContext(state)
        try:
            answer = await call_hook(hook, point, (event, ctx), self._redact)
        except HookFailed as failed:
            answer = _Failure(failed.what)
        if answer is not None and not isinstance(answer, (result, _Failure)):
            log.warning(
                "extension %s (%s) returned %s, not a %s or None",
                hook.path,
                point,
                type(answer).__name__,
                result.__name__,
            )
            answer = _Failure(f"answered a {type(answer).__name__}, not a {result.__name__}")
        await self._settle(state)
        if isinstance(answer, _Failure):
            if hook.fail == "closed":
                raise ExtensionStop(f"extension {hook.path} ({point}) {answer.what}", failed=True)
            return None
        return answer

    async def _settle(self, state: TurnState) -> None:
        """Do what an extension asked of the turn: a reload now, an abort by raising."""
        requests = state.requests
        if requests.reload:
            requests.reload = False
            await self._reload()
        if requests.abort is not None:
            reason = self._redact(requests.abort)
            log.info("turn of session %s aborted by an extension: %s", state.session_id, reason)
            raise ExtensionStop(requests.abort, failed=False)

    async def _reload(self) -> None:
        if self.reload is None:
            log.info("reload is not available here")
            return
        try:
            done = self.reload()
            if inspect.isawaitable(done):
                await done
        except Exception as exc:
            log.warning("reload asked by an extension failed: %s", self._redact(str(exc)))


class _JoinedInput:
    """The `Arrivals` of a turn, each message rewritten by the `input` extensions. An answer
    they give cannot end a turn already running: it is logged and the message joins as they
    left it."""

    def __init__(
        self,
        extensions: Extensions,
        arrivals: Arrivals,
        run_id: str,
        context: ChannelContext,
        state: TurnState,
    ) -> None:
        self._extensions = extensions
        self._arrivals = arrivals
        self._turn = (run_id, context, state)

    async def joining(self, step: int) -> list[Arrival]:
        """The messages joining before model call `step`, as the extensions leave them."""
        return [await self._rewritten(arrival) for arrival in await self._arrivals.joining(step)]

    async def answer(self, user_id: str) -> Arrival | None:
        """The answer to an `ask_user` question, as the extensions leave it."""
        arrival = await self._arrivals.answer(user_id)
        return None if arrival is None else await self._rewritten(arrival)

    async def _rewritten(self, arrival: Arrival) -> Arrival:
        run_id, context, state = self._turn
        message = await self._extensions.on_input(arrival.message, run_id, context, state)
        if state.requests.reply is not None:
            log.info("an input extension answered a message that joined a turn; ignored")
            state.requests.reply = None
        return replace(arrival, message=message)

    async def joined(self, arrival: Arrival) -> None:
        """Taken out of where it waited, as the arrivals do."""
        await self._arrivals.joined(arrival)


class _Failure:
    """An extension that raised, timed out or answered the wrong type."""

    def __init__(self, what: str) -> None:
        self.what = what


def _with_text(message: Message, text: str) -> Message:
    """`message` with its text parts replaced by `text` (its images kept)."""
    kept = [p for p in message.content if not isinstance(p, TextPart)]
    return message.model_copy(update={"content": [TextPart(text=text), *kept]})


def _about(run_id: str, context: ChannelContext, state: TurnState) -> dict[str, object]:
    """The fields every event carries."""
    return {
        "session_id": state.session_id,
        "run_id": run_id,
        "address": "" if context.address is None else str(context.address),
        "platform": context.platform,
        "user_id": context.user_id,
        "is_admin": context.is_admin,
        "scheduled": context.scheduled,
        "mode": context.mode.name,
    }


def load_extensions(
    *,
    input: str | Sequence[str | HookEntry] = (),
    before_agent_start: str | Sequence[str | HookEntry] = (),
    context: str | Sequence[str | HookEntry] = (),
    fail: FailMode = "closed",
    timeout: float = 5.0,
    redactor: Redactor | None = None,
    reload: Reloader | None = None,
    source: str = "[hooks]",
) -> Extensions:
    """Import every extension the profile names; a bad one is a `ConfigError` naming it."""
    return Extensions(
        load_point(input, fail, timeout, f"{source} input", takes=_TAKES),
        load_point(before_agent_start, fail, timeout, f"{source} before_agent_start", takes=_TAKES),
        load_point(context, fail, timeout, f"{source} context", takes=_TAKES),
        redactor=redactor,
        reload=reload,
    )
