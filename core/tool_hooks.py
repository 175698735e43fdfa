"""Tool hooks an operator plugs in from the profile, without changing the code (docs/hooks.md).

`[hooks] before_tool` and `after_tool` name Python callables as import paths
(`"mypkg.policy:check"`, or a list of them, or tables `{call = "...", fail = "open"}`), loaded
once at start-up by `load_tool_hooks`; a path that does not import, is not callable or does not
take one argument is a `ConfigError` naming it. Each callable, sync or async, gets a typed event
(`ToolCallEvent`, or `ToolResultEvent` after the call) and returns a `HookDecision` or None
(allow): block with a reason the model reads as the tool's result, patch the arguments (before)
or the result (after), add a note the model reads with the result, or (after) end the turn with
the result, without another model call (`core/tool_rounds.py`).

A hook that raises, times out or answers something else is logged (scrubbed) and treated as
its `fail` setting says: "closed" (the default) blocks the call, "open" lets it go on as if the
hook had allowed it. `ToolCalls` (core/tool_calls.py) calls these around each tool call.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ConfigError
from core.redact import Redactor

__all__ = [
    "AfterOutcome",
    "BeforeOutcome",
    "FailMode",
    "HookDecision",
    "HookEntry",
    "HookFailed",
    "HookSpec",
    "LoadedHook",
    "ToolCallEvent",
    "ToolHooks",
    "ToolResultEvent",
    "call_hook",
    "load_point",
    "load_tool_hooks",
]

log = logging.getLogger(__name__)

FailMode = Literal["open", "closed"]


class HookEntry(BaseModel):
    """One hook of a `[hooks]` point as a table: the import path and its own settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # "package.module:callable" (a dotted attribute path after the colon works too).
    call: str = Field(min_length=3)
    # Unset: the `[hooks] fail` / `timeout` of the table.
    fail: FailMode | None = None
    timeout: float | None = Field(default=None, gt=0, le=60)


# What a point of `[hooks]` holds: one path, or a list of paths and tables.
HookSpec = str | list[str | HookEntry]


class TurnFacts(BaseModel):
    """What every hook and extension event says about its turn."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    run_id: str = ""
    # The chat as `switchboard notify` names it ("telegram:42"), "" for a turn of no chat.
    address: str = ""
    platform: str = ""
    user_id: str = ""
    is_admin: bool = False
    scheduled: bool = False
    # The capability mode of the chat ("safe-chat", "full", ...).
    mode: str


class ToolCallEvent(TurnFacts):
    """A tool call the model asked for, as a `before_tool` hook sees it."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str


class ToolResultEvent(ToolCallEvent):
    """A tool call that ended, as an `after_tool` hook sees it: the (scrubbed) result too."""

    result: str
    is_error: bool = False
    # Whether the tool itself asked that the turn end with this result (`ToolResult`).
    end_turn: bool = False


class HookDecision(BaseModel):
    """What a hook answers; None (or `HookDecision()`) lets the call go on unchanged.

    `block`: the reason, which the model reads as the tool's (error) result; the tool does not
    run (after it ran: the result is replaced). `arguments` (before_tool only): the arguments
    to run with instead, checked against the tool's schema again. `result` (after_tool only):
    the text the model reads instead. `message`: a note added after the result for the model.
    `end_turn` (after_tool only): the turn ends with this result, the model not called again
    (when every call of the round ends it), the person answered with `answer` (None: the
    result's text).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block: str | None = Field(default=None, min_length=1)
    arguments: dict[str, Any] | None = None
    result: str | None = None
    message: str | None = Field(default=None, min_length=1)
    end_turn: bool = False
    answer: str | None = Field(default=None, min_length=1)

    @classmethod
    def allow(cls) -> HookDecision:
        """Let the call go on unchanged."""
        return cls()

    @classmethod
    def deny(cls, reason: str) -> HookDecision:
        """Block the call; the model reads `reason`."""
        return cls(block=reason)

    @classmethod
    def patch_arguments(cls, arguments: dict[str, Any]) -> HookDecision:
        """Run the tool with these arguments instead (before_tool)."""
        return cls(arguments=arguments)

    @classmethod
    def patch_result(cls, result: str) -> HookDecision:
        """Give the model this text as the tool's result instead (after_tool)."""
        return cls(result=result)

    @classmethod
    def note(cls, message: str) -> HookDecision:
        """Add a note the model reads with the tool's result."""
        return cls(message=message)

    @classmethod
    def end(cls, answer: str | None = None) -> HookDecision:
        """End the turn with this result (after_tool); the person gets `answer`, or the
        result's text when it is None."""
        return cls(end_turn=True, answer=answer)


# A hook: a tool hook takes the event, an extension (core/extensions.py) the event and a context.
HookFunction = Callable[..., Any]


@dataclass(frozen=True)
class LoadedHook:
    """One hook, imported: its path (the name logs and events use), function and settings."""

    path: str
    function: HookFunction
    fail: FailMode
    timeout: float


@dataclass
class BeforeOutcome:
    """What the `before_tool` hooks decided together."""

    arguments: dict[str, Any]
    # The path of the hook that blocked, and its reason.
    blocked_by: str = ""
    reason: str = ""
    patched_by: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


@dataclass
class AfterOutcome:
    """What the `after_tool` hooks made of a result."""

    result: str
    is_error: bool
    blocked_by: str = ""
    patched_by: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    # The hook that ended the turn with the result (the last one, if several did), and the
    # answer it gave (None: the result's text).
    ended_by: str = ""
    answer: str | None = None


class _HookFailed(Exception):
    """A hook raised, timed out or answered something that is not a decision."""


class ToolHooks:
    """The operator's tool hooks, called in the order configured.

    Before a call the first hook that blocks decides (later ones are not asked); argument
    patches compose, each hook seeing the arguments the one before returned. After a call
    result patches compose the same way. Notes from every hook are kept, in order.
    """

    def __init__(
        self,
        before: Sequence[LoadedHook] = (),
        after: Sequence[LoadedHook] = (),
        *,
        redactor: Redactor | None = None,
    ) -> None:
        self.before = list(before)
        self.after = list(after)
        self._redact = redactor or Redactor()

    def __bool__(self) -> bool:
        return bool(self.before or self.after)

    async def before_tool(self, event: ToolCallEvent) -> BeforeOutcome:
        """Ask each `before_tool` hook in turn; see the class for how answers combine."""
        outcome = BeforeOutcome(arguments=dict(event.arguments))
        for hook in self.before:
            seen = event.model_copy(update={"arguments": outcome.arguments})
            try:
                decision = await self._ask(hook, seen, "before_tool")
            except _HookFailed as failed:
                if hook.fail == "closed":
                    outcome.blocked_by, outcome.reason = hook.path, str(failed)
                    return outcome
                continue
            if decision.message:
                outcome.messages.append(decision.message)
            if decision.block is not None:
                outcome.blocked_by, outcome.reason = hook.path, decision.block
                return outcome
            if decision.arguments is not None:
                outcome.arguments = decision.arguments
                outcome.patched_by.append(hook.path)
        return outcome

    async def after_tool(self, event: ToolResultEvent) -> AfterOutcome:
        """Give each `after_tool` hook the result as the one before left it."""
        outcome = AfterOutcome(result=event.result, is_error=event.is_error)
        for hook in self.after:
            seen = event.model_copy(update={"result": outcome.result, "is_error": outcome.is_error})
            try:
                decision = await self._ask(hook, seen, "after_tool")
            except _HookFailed as failed:
                if hook.fail == "closed":
                    outcome.result, outcome.is_error = str(failed), True
                    outcome.blocked_by = hook.path
                    return outcome
                continue
            if decision.message:
                outcome.messages.append(decision.message)
            if decision.block is not None:
                outcome.result, outcome.is_error = decision.block, True
                outcome.blocked_by = hook.path
                return outcome
            if decision.result is not None:
                outcome.result = decision.result
                outcome.patched_by.append(hook.path)
            if decision.end_turn:
                outcome.ended_by = hook.path
                outcome.answer = decision.answer if decision.answer is not None else outcome.answer
        return outcome

    async def _ask(self, hook: LoadedHook, event: ToolCallEvent, point: str) -> HookDecision:
        try:
            answer = await call_hook(hook, point, (event,), self._redact)
        except HookFailed as failed:
            raise _HookFailed(_failed(hook, event, failed.what)) from None
        if answer is None:
            return HookDecision()
        if not isinstance(answer, HookDecision):
            log.warning(
                "hook %s (%s) returned %s, not a HookDecision or None",
                hook.path,
                point,
                type(answer).__name__,
            )
            raise _HookFailed(_failed(hook, event, "answered something that is not a decision"))
        if point == "before_tool" and (answer.result is not None or answer.end_turn):
            log.warning(
                "hook %s patched a result or ended the turn before the tool ran; ignored", hook.path
            )
        if point == "after_tool" and answer.arguments is not None:
            log.warning("hook %s patched arguments after the tool ran; ignored", hook.path)
        return answer


class HookFailed(Exception):
    """A hook raised or timed out (logged, scrubbed, by `call_hook`); `what` says which."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


async def call_hook(
    hook: LoadedHook, point: str, arguments: tuple[object, ...], redactor: Redactor
) -> object:
    """Call `hook` with `arguments` within its timeout and return its answer; a hook that
    raises or times out is logged (its message scrubbed) and raises `HookFailed`. Shared by
    the tool hooks and the extensions (core/extensions.py)."""
    try:
        async with asyncio.timeout(hook.timeout):
            return await _call(hook.function, arguments)
    except TimeoutError:
        log.warning("hook %s (%s) timed out after %gs", hook.path, point, hook.timeout)
        raise HookFailed(f"timed out after {hook.timeout:g}s") from None
    except Exception as exc:
        # The operator's code: its message may quote the arguments, so it is scrubbed.
        log.warning(
            "hook %s (%s) raised %s: %s",
            hook.path,
            point,
            type(exc).__name__,
            redactor(str(exc)),
        )
        raise HookFailed("failed") from None


async def _call(function: HookFunction, arguments: tuple[object, ...]) -> object:
    if _is_async(function):
        return await function(*arguments)
    # A sync hook runs in a thread, so a slow one cannot stall the turns of other chats and
    # its timeout holds (the thread itself finishes in its own time).
    answer = await asyncio.to_thread(function, *arguments)
    if inspect.isawaitable(answer):
        return await answer
    return answer


def _is_async(function: Callable[..., Any]) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 - a callable object's method
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _failed(hook: LoadedHook, event: ToolCallEvent, what: str) -> str:
    # What the model reads when a hook configured `fail = "closed"` fails.
    return f"Tool {event.tool!r} was blocked: the policy hook {hook.path} {what}."


def load_tool_hooks(
    *,
    before_tool: str | Sequence[str | HookEntry] = (),
    after_tool: str | Sequence[str | HookEntry] = (),
    fail: FailMode = "closed",
    timeout: float = 5.0,
    redactor: Redactor | None = None,
    source: str = "[hooks]",
) -> ToolHooks:
    """Import every hook the profile names; a bad one is a `ConfigError` naming it."""
    return ToolHooks(
        load_point(before_tool, fail, timeout, f"{source} before_tool"),
        load_point(after_tool, fail, timeout, f"{source} after_tool"),
        redactor=redactor,
    )


def load_point(
    spec: str | Sequence[str | HookEntry],
    fail: FailMode,
    timeout: float,
    where: str,
    *,
    takes: tuple[str, ...] = ("the event",),
) -> list[LoadedHook]:
    """Import the hooks of one point; each must take the arguments `takes` names."""
    entries = [spec] if isinstance(spec, str) else list(spec)
    loaded = []
    for entry in entries:
        if isinstance(entry, str):
            entry = HookEntry(call=entry)
        loaded.append(
            LoadedHook(
                path=entry.call,
                function=_import(entry.call, where, takes),
                fail=entry.fail or fail,
                timeout=entry.timeout or timeout,
            )
        )
    return loaded


def _import(path: str, where: str, takes: tuple[str, ...]) -> HookFunction:
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise ConfigError(f'{where}: {path!r} is not an import path like "package.module:function"')
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"{where}: {path!r}: cannot import {module_name}: {type(exc).__name__}: {exc}"
        ) from None
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise ConfigError(f"{where}: {path!r}: {module_name} has no {attribute}") from None
    if not callable(target):
        raise ConfigError(f"{where}: {path!r} is not callable")
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return target  # type: ignore[no-any-return]
    try:
        signature.bind(*(object() for _ in takes))
    except TypeError:
        count = "one argument" if len(takes) == 1 else f"{len(takes)} arguments"
        raise ConfigError(
            f"{where}: {path!r} must take {count} ({', '.join(takes)}); it takes {signature}"
        ) from None
    return target  # type: ignore[no-any-return]
