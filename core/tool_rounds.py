"""`ToolRounds`: one round of a turn's tool calls, and what follows it.

A round runs the calls of one model answer (`core/tool_calls.py`): contiguous read-only ones
together, the others alone and in order, each group's results stored before the next group
runs (the last group's with the checkpoint moved on). Then either:

- every call of the round ended the turn (a tool's `ToolResult.end_turn`, an `after_tool`
  hook's `HookDecision.end`, seed 004's `terminate`): the answer is stored as the assistant's
  in the same write as the last results, and the turn ends with it, the model not called
  again; or
- the model is asked again, and with `verify` set the request (that request only: it is never
  stored, nor shown to the person) ends with a short instruction to check the results against
  the task (seed 000's `DoneCriteria`). docs/decisions/0022-loop-end.md says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from core.events import AgentEvent, CheckpointSaved
from core.messages import Message, ToolCall
from core.tool_calls import ToolCalls
from core.tools.base import ToolContext
from core.turn_state import ChannelContext, TurnState
from core.turn_writes import TurnWrites

__all__ = ["VERIFY_PROMPT", "Round", "ToolRounds", "verification"]

# What the model reads after a tool round when the profile sets `verify_after_tools`.
VERIFY_PROMPT = (
    "[A check from the system, not a message from the person] Before you go on, look at the "
    "tool results above against what the person asked: do they meet the task? If something "
    "remains, say what and continue; if a result failed, try another way; if the task is "
    "done, give the answer."
)


def verification(criteria: str = "") -> str:
    """The instruction added after each tool round: `VERIFY_PROMPT`, with the profile's
    `verify_criteria` (what "done" means for this bot) when it has some."""
    criteria = criteria.strip()
    if not criteria:
        return VERIFY_PROMPT
    return f"{VERIFY_PROMPT} The task is done when: {criteria}"


@dataclass
class Round:
    """A round's results as stored and, when the round ended the turn, its answer (stored
    after them as the assistant's message)."""

    messages: list[Message] = field(default_factory=list)
    answer: str | None = None


class ToolRounds:
    """Runs a turn's tool rounds through `calls`, stores them through `writes`; `verify`: the
    instruction added to the request after a round (None: none)."""

    def __init__(self, calls: ToolCalls, writes: TurnWrites, verify: str | None = None) -> None:
        self.calls = calls
        self.writes = writes
        self.verify = verify
        # One message for every request: what providers derive from it is kept with it.
        self._check = None if verify is None else Message.user(verify)

    async def run(
        self,
        session_id: str,
        calls: list[ToolCall],
        context: ChannelContext,
        tool_context: ToolContext,
        emit: Callable[[AgentEvent | None], None],
        state: TurnState,
        step: int,
    ) -> Round:
        """Run the calls of step `step`'s answer and store their results, the checkpoint moved
        on to `step` tool rounds with the last group's; the answer too when all end the turn."""
        done = Round()
        answers: list[str | None] = []
        groups = self.calls.groups(calls)
        # The model the turn calls now (degraded, perhaps): a sub-agent's runs on it too.
        tool_context = tool_context.model_copy(update={"model": state.model})
        for index, group in enumerate(groups):
            outcomes = await asyncio.gather(
                *(self.calls.run(c, context.mode, tool_context, emit, state.monitor) for c in group)
            )
            made = [
                Message.tool_result(call, outcome.output, is_error=outcome.is_error)
                for call, outcome in zip(group, outcomes, strict=True)
            ]
            answers += [outcome.answer for outcome in outcomes]
            last = index == len(groups) - 1
            if last and None not in answers and any(answers):
                # An empty answer says nothing to the person: the model is asked instead.
                done.answer = "\n\n".join(a for a in answers if a)
                made.append(Message.assistant(done.answer))
            rounds = step if last else None
            done.messages += await self.writes.persist(session_id, state, made, rounds=rounds)
            if rounds is not None and state.checkpoint is not None:
                emit(CheckpointSaved(run_key=state.checkpoint.run_key, tool_rounds=rounds))
        return done

    def checked(self, messages: list[Message]) -> list[Message]:
        """`messages` for a request; after a tool round, with `verify` (when set) at the end."""
        if self._check is None or not messages or messages[-1].role != "tool":
            return messages
        return [*messages, self._check]
