"""`ToolCalls`: how a turn runs the tool calls of one model answer.

Each call is checked against the chat's capability mode (a privileged one confirmed where the
mode asks for it), guarded by the loop monitor, the runtime's hooks and the operator's tool
hooks (`[hooks] before_tool` / `after_tool`, core/tool_hooks.py), run under the tool timeout,
and its output redacted, cut to `MAX_TOOL_OUTPUT` characters (the whole text kept in the store
and the model told how to read on with `read_tool_output`) and fenced when it looks like an
injection. A failing tool is an error result the model reads, never a failed turn. A result
the tool (`ToolResult.end_turn`) or an `after_tool` hook (`HookDecision.end`) marks as ending
the turn carries the answer the person gets (`ToolOutcome.answer`).
The runtime (`core/runtime.py`) stores the results; this module only runs the calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import StatusCode

from core.confirm import Confirm
from core.errors import StoreError, ToolError, ToolNotAllowed
from core.events import AgentEvent, ToolFinished, ToolRequested
from core.hooks import HookChain
from core.messages import ToolCall
from core.modes import CapabilityMode
from core.redact import Redactor
from core.safety import ToolCallMonitor, fence_tool_output, scan_tool_output
from core.store.tool_outputs import ToolOutputs
from core.tool_hooks import ToolCallEvent, ToolHooks, ToolResultEvent
from core.tools.base import SafetyTier, Tool, ToolContext, ToolRegistry, ToolResult
from core.tracing import TOOL_DURATION_MS, TOOL_IS_ERROR, TOOL_NAME, span

__all__ = ["MAX_TOOL_OUTPUT", "ToolCalls", "ToolOutcome"]

log = logging.getLogger(__name__)

# A tool's output longer than this is cut (with a note saying so) before the model reads it.
MAX_TOOL_OUTPUT = 16_000


@dataclass(frozen=True)
class ToolOutcome:
    """One call's result as the model reads it, whether it is an error, and, when it ends
    the turn, the answer the person gets (None: it does not end the turn)."""

    output: str
    is_error: bool = False
    answer: str | None = None


class ToolCalls:
    """Runs tool calls for a turn: checks, hooks, timeout, redaction, the output's cut."""

    def __init__(
        self,
        *,
        tools: ToolRegistry,
        hooks: HookChain,
        redactor: Redactor,
        confirm: Confirm | None,
        timeout: float,
        tool_hooks: ToolHooks | None = None,
        outputs: ToolOutputs | None = None,
    ) -> None:
        """`confirm` asks the person before a privileged tool runs where the mode wants it;
        without it such calls are refused. `timeout`: the seconds one call may take.
        `tool_hooks`: the operator's hooks from the profile's `[hooks]`. `outputs` keeps the
        whole text of a cut output (for `read_tool_output`); without it the rest is lost."""
        self.outputs = outputs
        self.tools = tools
        self.hooks = hooks
        self.tool_hooks = tool_hooks or ToolHooks()
        self._redact = redactor
        self._confirm = confirm
        self.timeout = timeout

    def groups(self, calls: list[ToolCall]) -> list[list[ToolCall]]:
        """The calls in groups run one after another: contiguous read-only calls together, every
        other call alone, in the order the model gave them."""
        groups: list[list[ToolCall]] = []
        for call in calls:
            concurrent = self._is_read_only(call)
            if concurrent and groups and all(self._is_read_only(c) for c in groups[-1]):
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    def _is_read_only(self, call: ToolCall) -> bool:
        # Calls that will be refused (unknown tool) have no effect, so they may overlap.
        if call.name not in self.tools:
            return True
        return self.tools.get(call.name).tier is SafetyTier.READ_ONLY

    async def run(
        self,
        call: ToolCall,
        mode: CapabilityMode,
        tool_context: ToolContext,
        emit: Callable[[AgentEvent | None], None],
        monitor: ToolCallMonitor,
    ) -> ToolOutcome:
        """Run one call under its `tool call` span: its output as the model reads it, whether
        it is an error, and whether it ends the turn."""
        # Its name and outcome only: arguments and output may hold what people wrote.
        with span("tool call", attributes={TOOL_NAME: call.name}) as current:
            started = time.perf_counter()
            outcome = await self._run(call, mode, tool_context, emit, monitor)
            current.set_attribute(TOOL_IS_ERROR, outcome.is_error)
            current.set_attribute(TOOL_DURATION_MS, (time.perf_counter() - started) * 1000)
            if outcome.is_error:
                current.set_status(StatusCode.ERROR)
            return outcome

    async def _run(
        self,
        call: ToolCall,
        mode: CapabilityMode,
        tool_context: ToolContext,
        emit: Callable[[AgentEvent | None], None],
        monitor: ToolCallMonitor,
    ) -> ToolOutcome:
        arguments = self._redact.data(call.arguments)
        emit(ToolRequested(call_id=call.id, name=call.name, arguments=arguments))
        started = time.perf_counter()
        verdict = monitor.record_call(
            call.name, call.arguments if call.raw_arguments is None else {"": call.raw_arguments}
        )
        hooked = _Hooked()
        try:
            if verdict.action == "stop":
                raise ToolError(verdict.note)
            if (blocked := await self.hooks.before_tool_call(call, tool_context)) is not None:
                raise ToolError(blocked)
            if self.tool_hooks.before and call.raw_arguments is None:
                call = await self._before(call, mode, tool_context, hooked)
            output, is_error = await self._invoke(call, mode, tool_context, emit, hooked), False
        except ToolError as exc:
            output, is_error = str(exc), True
        except TimeoutError:
            output = f"Tool {call.name!r} timed out after {self._timeout_of(call):g}s."
            is_error = True
        except Exception as exc:
            log.exception("tool %s raised", call.name)
            output, is_error = f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}", True
        # Hooks read redacted output, and what they return is redacted again.
        output = self._redact(
            await self.hooks.after_tool_call(call, self._redact(output), is_error)
        )
        if self.tool_hooks.after:
            output, is_error = await self._after(call, mode, tool_context, output, is_error, hooked)
        if len(output) > MAX_TOOL_OUTPUT:
            output = await self._cut(call, output, tool_context)
        if flags := scan_tool_output(output):
            output = fence_tool_output(output, flags)
        answer = hooked.answer(output, is_error)  # without the notes, which are for the model
        hint = monitor.record_result(call.name, is_error=is_error, output=output)
        notes = [n for n in (verdict.note if verdict.action == "run" else "", hint) if n]
        notes += [f"Note: {self._redact(m)}" for m in hooked.messages]
        if notes:
            output = "\n\n".join([output, *notes])
        emit(
            ToolFinished(
                call_id=call.id,
                name=call.name,
                output=output,
                is_error=is_error,
                duration_ms=(time.perf_counter() - started) * 1000,
                blocked_by=hooked.blocked_by,
                patched_by=hooked.patched_by,
                arguments=hooked.arguments,
            )
        )
        return ToolOutcome(output, is_error, answer)

    async def _cut(self, call: ToolCall, output: str, tool_context: ToolContext) -> str:
        """`output` cut for the model; its whole (already scrubbed) text kept, when there is
        a store for it, and the model told how to read on."""
        shown = output[:MAX_TOOL_OUTPUT]
        if self.outputs is not None:
            try:
                await self.outputs.keep_tool_output(tool_context.session_id, call.id, output)
            except StoreError as exc:
                log.warning("could not keep the whole output of %s: %s", call.name, exc)
            else:
                return (
                    f"{shown}\n[output cut at {MAX_TOOL_OUTPUT} of {len(output)} characters; "
                    f'read_tool_output(call_id="{call.id}", offset={MAX_TOOL_OUTPUT}) reads on]'
                )
        return f"{shown}\n[output cut at {MAX_TOOL_OUTPUT} characters]"

    async def _before(
        self, call: ToolCall, mode: CapabilityMode, tool_context: ToolContext, hooked: _Hooked
    ) -> ToolCall:
        """The call as the `before_tool` hooks leave it; raises `ToolError` when one blocks it
        or patches it into arguments the tool does not take."""
        outcome = await self.tool_hooks.before_tool(
            ToolCallEvent(
                tool=call.name,
                arguments=call.arguments,
                call_id=call.id,
                **_about(mode, tool_context),
            )
        )
        hooked.messages += outcome.messages
        if outcome.blocked_by:
            hooked.blocked_by = outcome.blocked_by
            log.info("tool %s blocked by hook %s", call.name, outcome.blocked_by)
            raise ToolError(outcome.reason)
        if not outcome.patched_by:
            return call
        hooked.patched_by += outcome.patched_by
        hooked.arguments = self._redact.data(outcome.arguments)
        log.info("arguments of tool %s patched by %s", call.name, ", ".join(outcome.patched_by))
        if call.name in self.tools:
            # A patch is checked as the model's arguments are; the mode and the confirmation
            # still apply to the patched call (`_invoke`), so a hook cannot widen what runs.
            try:
                self.tools.get(call.name).parse(outcome.arguments)
            except ToolError as exc:
                raise ToolError(
                    f"A hook ({', '.join(outcome.patched_by)}) changed the arguments into ones "
                    f"the tool does not take. {exc}"
                ) from None
        return call.model_copy(update={"arguments": outcome.arguments})

    async def _after(
        self,
        call: ToolCall,
        mode: CapabilityMode,
        tool_context: ToolContext,
        output: str,
        is_error: bool,
        hooked: _Hooked,
    ) -> tuple[str, bool]:
        """The result as the `after_tool` hooks leave it (read scrubbed, scrubbed again)."""
        outcome = await self.tool_hooks.after_tool(
            ToolResultEvent(
                tool=call.name,
                arguments=call.arguments,
                call_id=call.id,
                result=output,
                is_error=is_error,
                end_turn=hooked.end_turn,
                **_about(mode, tool_context),
            )
        )
        hooked.messages += outcome.messages
        if outcome.ended_by and not outcome.is_error:  # a later block undoes the end
            log.info("tool %s ends the turn, as hook %s decided", call.name, outcome.ended_by)
            hooked.end_turn = True
            if outcome.answer is not None:
                hooked.final = self._redact(outcome.answer)
        hooked.patched_by += outcome.patched_by
        if outcome.blocked_by:
            hooked.blocked_by = outcome.blocked_by
            log.info("result of tool %s blocked by hook %s", call.name, outcome.blocked_by)
        elif outcome.patched_by:
            log.info("result of tool %s patched by %s", call.name, ", ".join(outcome.patched_by))
        return self._redact(outcome.result), outcome.is_error

    def _timeout_of(self, call: ToolCall) -> float:
        """The seconds `call` may take: its tool's own bound, else the runtime's."""
        if call.name in self.tools and (own := self.tools.get(call.name).timeout) is not None:
            return own
        return self.timeout

    async def _invoke(
        self,
        call: ToolCall,
        mode: CapabilityMode,
        tool_context: ToolContext,
        emit: Callable[[AgentEvent | None], None],
        hooked: _Hooked,
    ) -> str:
        if call.raw_arguments is not None:
            raise ToolError(
                f"Arguments for {call.name} must be a JSON object; "
                f"got {call.raw_arguments[:200]!r}."
            )
        tool: Tool[Any] = self.tools.get(call.name)
        if not mode.allows(tool):
            raise ToolNotAllowed(mode.refusal(tool))
        if tool.tier is SafetyTier.PRIVILEGED and mode.confirm_privileged:
            if self._confirm is None:
                # Nobody can be asked; refusing is the safe default.
                raise ToolNotAllowed(
                    f"Tool {call.name!r} needs a confirmation this chat cannot ask for."
                )
            shown = call.model_copy(update={"arguments": self._redact.data(call.arguments)})
            if not await self._confirm(shown, tool_context):
                raise ToolNotAllowed(f"The user refused. Tool {call.name!r} did not run.")
        per_call = tool_context.model_copy(update={"call_id": call.id, "mode": mode, "emit": emit})
        async with asyncio.timeout(self._timeout_of(call)):
            result: ToolResult = await tool.result(call.arguments, per_call)
        if result.end_turn:
            hooked.end_turn = True
            hooked.final = None if result.answer is None else self._redact(result.answer)
        return result.text


class _Hooked:
    """What the operator's tool hooks did to one call, for its `ToolFinished` event, and
    whether the call (the tool or a hook) ends the turn, with which answer."""

    def __init__(self) -> None:
        self.blocked_by = ""
        self.patched_by: list[str] = []
        self.arguments: dict[str, Any] | None = None
        self.messages: list[str] = []
        self.end_turn = False
        # The answer the tool or a hook gave for the person; None: the result's text.
        self.final: str | None = None

    def answer(self, output: str, is_error: bool) -> str | None:
        """What the person gets when the call ends the turn (an error never does), else None."""
        if not self.end_turn or is_error:
            return None
        return output if self.final is None else self.final


def _about(mode: CapabilityMode, context: ToolContext) -> dict[str, Any]:
    """The fields of a hook's event that describe the turn."""
    return {
        "session_id": context.session_id,
        "run_id": context.run_id,
        "address": "" if context.address is None else str(context.address),
        "platform": context.platform,
        "user_id": context.user_id,
        "is_admin": context.is_admin,
        "scheduled": context.scheduled,
        "mode": mode.name,
    }
