"""Sub-agents: the `delegate` tool runs a bounded child turn of the runtime.

A child turn gets its own instructions (the call's `task`), a capability mode never wider than
its parent's (`CapabilityMode.narrowed_to`), its own limits (`[subagents]`: steps, seconds and
USD) and its own session, `<parent session>/sub/<call id>`, so the parent's history holds only
the call and its result. It runs on the model the parent's turn calls (the chat's `/model`
choice, or the cheaper model once the parent degraded). Its model calls are charged to the
ledger under the parent's session, person and chat, so the parent's `per_session` and daily
budgets and its `/cost` count them. Its events reach
the parent's stream wrapped in `ChildEvent` (the lifecycle topic shows them with
`parent_run_id` and `depth`). A child has no `delegate` tool: depth is at most 1.

`delegate` is read-only for scheduling, so several calls of one answer run together (bounded
by `max_parallel`); each child's own tools keep their tiers, modes and confirmations.
Cancelling the parent stops its children the way a person's cancel stops a turn (the cut
model call charged, the child's open tool calls closed). A crash abandons a running child:
the parent's resumed turn tells the model that call was interrupted, and does not run it again.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ConfigError, ToolError
from core.events import Cancelled, ChildEvent, RunCompleted, RunFailed, RunStarted, TextDelta
from core.messages import Message
from core.modes import CapabilityMode, ModeCatalog
from core.runtime import AgentRuntime
from core.tools.ask_user import ASK_USER
from core.tools.base import SafetyTier, Tool, ToolContext, ToolRegistry
from core.turn_state import ChannelContext, RuntimeLimits

__all__ = ["DELEGATE", "DelegateArgs", "SubagentOptions", "Subagents"]

DELEGATE = "delegate"

# Seconds past a child's own time limit before the tool call itself is cut: the child stops
# itself at its limit (charging its cut call); this bound only catches one that does not.
_GRACE_SECONDS = 30.0

# What a child reads in its system prompt about its place.
_CHILD_HINT = (
    "You are a sub-agent: another assistant gave you the task in the user message. Work on it "
    "with the tools offered and answer with the result only; nobody but that assistant reads "
    "your answer, and you cannot ask anyone questions."
)

Outcome = RunCompleted | RunFailed | Cancelled


class SubagentOptions(BaseModel):
    """`[subagents]` of profile.toml: the limits of one `delegate` call's child turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(default=4, ge=1, le=100)
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    # USD one child turn may spend; None: only the parent's budgets apply.
    max_cost_usd: float | None = Field(default=0.10, ge=0)
    # Children of one process running at once; more calls wait for a slot.
    max_parallel: int = Field(default=2, ge=1, le=32)


class DelegateArgs(BaseModel):
    """The arguments of `delegate`."""

    task: str = Field(
        min_length=1,
        max_length=20_000,
        description=(
            "The task for the sub-agent, complete in itself: it sees nothing of this "
            "conversation, only this text."
        ),
    )
    mode: str | None = Field(
        default=None,
        description=(
            "The capability mode the sub-agent runs in (e.g. 'no-tools', 'safe-chat'); never "
            "wider than this chat's. Default: this chat's mode."
        ),
    )


class _Child:
    """One child turn while it runs: how to stop it, and whether its time ran out."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        self.stop.set()


class Subagents:
    """Runs `delegate` calls as child turns of `parent` (one per runtime)."""

    def __init__(
        self,
        parent: AgentRuntime,
        options: SubagentOptions | None = None,
        modes: ModeCatalog | None = None,
    ) -> None:
        """`modes`: the modes a call may name (the deployment's catalog; default: built-in)."""
        self.parent = parent
        self.options = options or SubagentOptions()
        self.modes = modes or ModeCatalog()
        self._slots = asyncio.Semaphore(self.options.max_parallel)
        self._running = 0

    @property
    def running(self) -> int:
        """Child turns running now (each holds one of the `max_parallel` slots)."""
        return self._running

    def tool(self) -> Tool[DelegateArgs]:
        """The `delegate` tool; add it to the parent's registry."""
        return Tool(
            name=DELEGATE,
            description=(
                "Hand a self-contained task to a sub-agent that works on it alone (with the "
                "tools of its mode) and returns its answer. Several delegate calls in one "
                "answer run at the same time."
            ),
            args=DelegateArgs,
            tier=SafetyTier.READ_ONLY,
            run=self.delegate,
            timeout=self.options.timeout_seconds + _GRACE_SECONDS,
        )

    async def delegate(self, args: DelegateArgs, context: ToolContext) -> str:
        """Run the child turn for `args.task`; its answer is the result."""
        parent_mode, emit = context.mode, context.emit
        if not isinstance(parent_mode, CapabilityMode) or emit is None:
            raise ToolError("delegate runs only inside a turn.")
        # A child answers its parent, not the person: it neither delegates nor asks them.
        tools = ToolRegistry(t for t in self.parent.tools if t.name not in (DELEGATE, ASK_USER))
        mode, note = self._mode_for(args.mode, parent_mode)
        session_id = f"{context.session_id}/sub/{context.call_id}"
        channel = ChannelContext(
            platform=context.platform,
            mode=mode,
            prompt_hint=_CHILD_HINT,
            session_key=session_id,
            user_id=context.user_id,
            address=context.address,
            # Its session is wholly the person's it works for (`direct_with`, as a DM's), so
            # erasing that person erases it too (core/store/people.py), even from a group.
            is_direct=True,
            is_admin=context.is_admin,
            scheduled=context.scheduled,
            # Its calls count to the parent's session: its `per_session` budget and `/cost`.
            charge_session=context.charge_session or context.session_id,
        )
        limits = self.parent.limits
        runtime = self.parent.child(
            tools=tools,
            limits=RuntimeLimits(
                max_steps=self.options.max_steps,
                tool_timeout=limits.tool_timeout,
                max_tokens=limits.max_tokens,
                max_turn_cost_usd=self.options.max_cost_usd,
                # The parent's conversation limit, read on the parent's session (charged there).
                max_spend_usd=limits.max_spend_usd,
                stream_buffer_size=limits.stream_buffer_size,
                text_tool_calls=limits.text_tool_calls,
            ),
        )
        async with self._slots:
            self._running += 1
            child = _Child()
            timer = asyncio.get_running_loop().call_later(
                self.options.timeout_seconds, child.expire
            )
            follow = asyncio.create_task(
                self._follow(runtime, session_id, args.task, channel, child, context),
                name=f"subagent:{session_id}",
            )
            try:
                outcome = await asyncio.shield(follow)
            except asyncio.CancelledError:
                # The parent was cancelled: the child stops as a cancelled turn does (its cut
                # call charged, its open calls closed) before the parent goes on cancelling.
                child.stop.set()
                await follow
                raise
            finally:
                timer.cancel()
                self._running -= 1
        return note + self._result(outcome, child)

    def _mode_for(self, asked: str | None, parent: CapabilityMode) -> tuple[CapabilityMode, str]:
        """The child's mode and, when the one asked for was wider than the parent's, a note
        saying it was narrowed."""
        if asked is None or asked == parent.name:
            return parent, ""
        try:
            wanted = self.modes.get(asked)
        except ConfigError as exc:
            raise ToolError(str(exc)) from None
        chosen = wanted.narrowed_to(parent)
        if wanted.within(parent):
            return chosen, ""
        return chosen, (
            f"[Mode {asked!r} is wider than this chat's ({parent.name!r}); "
            f"the sub-agent ran in {parent.name!r}.]\n"
        )

    async def _follow(
        self,
        runtime: AgentRuntime,
        session_id: str,
        task: str,
        channel: ChannelContext,
        child: _Child,
        context: ToolContext,
    ) -> Outcome | None:
        """Run the child turn, passing its events on nested; its last event."""
        emit = context.emit
        assert emit is not None  # checked by `delegate`
        outcome: Outcome | None = None
        run_id = ""
        events = runtime.run(
            session_id, Message.user(task), channel, cancel=child.stop, model=context.model or None
        )
        async for event in events:
            if isinstance(event, RunStarted):
                run_id, session_id = event.run_id, event.session_id
            if isinstance(event, RunCompleted | RunFailed | Cancelled):
                outcome = event
            if isinstance(event, TextDelta):
                continue  # a child's answer reaches the parent whole, as the tool's result
            emit(
                ChildEvent(
                    parent_run_id=context.run_id,
                    call_id=context.call_id,
                    run_id=run_id,
                    session_id=session_id,
                    event=event,
                )
            )
        return outcome

    def _result(self, outcome: Outcome | None, child: _Child) -> str:
        """What the parent's model reads: the child's answer, or why there is none."""
        match outcome:
            case RunCompleted(text=text):
                return text
            case RunFailed(message=message):
                raise ToolError(f"The sub-agent stopped without an answer: {message}")
            case Cancelled() if child.expired:
                raise ToolError(
                    f"The sub-agent ran out of time ({self.options.timeout_seconds:g}s) and "
                    "was stopped."
                )
            case _:
                raise ToolError("The sub-agent was stopped before it answered.")
