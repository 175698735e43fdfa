"""Runtime hooks: code an operator runs at fixed points of a turn.

A `Hooks` implementation sees every model call, may block or patch tool calls, and hears of
compactions and of the turn's end. `NoHooks` is a base with no-op defaults to override;
`HookChain` runs several in order and keeps a hook that raises from breaking the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.events import Cancelled, Compacted, Finished, RunCompleted, RunFailed
from core.messages import ToolCall
from core.providers.base import ModelRequest
from core.tools.base import ToolContext

__all__ = ["HookChain", "Hooks", "ModelCompletion", "NoHooks", "TurnEnd"]

log = logging.getLogger(__name__)

# The last event of a turn.
TurnEnd = RunCompleted | RunFailed | Cancelled


class ModelCompletion(BaseModel):
    """What one model call answered: its text, the tool calls it asked for, its usage."""

    model_config = ConfigDict(frozen=True)

    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finished: Finished = Field(default_factory=Finished)


class Hooks(Protocol):
    """Points of a turn where an operator's code runs; see `NoHooks` for the defaults."""

    async def before_model(self, request: ModelRequest) -> None:
        """Called before each model call with what is sent."""

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        """Called after each model call that answered."""

    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        """A string blocks the call and is the error result the model reads; None lets it run."""

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        """The tool's output as the model should read it (return `output` to leave it)."""

    async def on_compaction(self, event: Compacted) -> None:
        """Called when older turns were summarized to fit the context window."""

    async def on_agent_end(self, event: TurnEnd) -> None:
        """Called with the last event of a turn."""


class NoHooks:
    """Hooks that do nothing; subclass it and override the points you need."""

    async def before_model(self, request: ModelRequest) -> None:
        """Nothing."""

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        """Nothing."""

    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        """Lets every call run."""
        return None

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        """Leaves the output as it is."""
        return output

    async def on_compaction(self, event: Compacted) -> None:
        """Nothing."""

    async def on_agent_end(self, event: TurnEnd) -> None:
        """Nothing."""


class HookChain:
    """Several hooks called in order; a hook that raises is logged and skipped.

    The first hook that blocks a tool call decides (later ones are not asked); patches of a
    tool's output compose, each hook reading what the one before returned.
    """

    def __init__(self, hooks: Iterable[Hooks] = ()) -> None:
        self.hooks = list(hooks)

    async def before_model(self, request: ModelRequest) -> None:
        """Every hook's `before_model`."""
        for hook in self.hooks:
            try:
                await hook.before_model(request)
            except Exception:
                _ignored(hook, "before_model")

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        """Every hook's `after_model`."""
        for hook in self.hooks:
            try:
                await hook.after_model(request, completion)
            except Exception:
                _ignored(hook, "after_model")

    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        """The first block any hook returns, or None."""
        for hook in self.hooks:
            try:
                blocked = await hook.before_tool_call(call, context)
            except Exception:
                _ignored(hook, "before_tool_call")
                continue
            if blocked is not None:
                return blocked
        return None

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        """The output patched by every hook in turn."""
        for hook in self.hooks:
            try:
                patched = await hook.after_tool_call(call, output, is_error)
            except Exception:
                _ignored(hook, "after_tool_call")
                continue
            if isinstance(patched, str):
                output = patched
            else:
                log.warning("%s.after_tool_call returned no text; ignored", _name(hook))
        return output

    async def on_compaction(self, event: Compacted) -> None:
        """Every hook's `on_compaction`."""
        for hook in self.hooks:
            try:
                await hook.on_compaction(event)
            except Exception:
                _ignored(hook, "on_compaction")

    async def on_agent_end(self, event: TurnEnd) -> None:
        """Every hook's `on_agent_end`."""
        for hook in self.hooks:
            try:
                await hook.on_agent_end(event)
            except Exception:
                _ignored(hook, "on_agent_end")


def _name(hook: Hooks) -> str:
    return type(hook).__name__


def _ignored(hook: Hooks, point: str) -> None:
    # A hook is the operator's code: its bug must not cost the user their answer.
    log.exception("hook %s.%s raised; ignored", _name(hook), point)
