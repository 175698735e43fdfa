"""The `ask_user` tool: the model asks the person a question mid-turn and waits for the answer.

The question goes to the chat through the confirmation gate's machinery
(`Confirmations.ask`, core/confirm.py): the asker's next message in that chat, whatever it
says, is the tool's result, and is marked processed so it does not start a turn of its own.
No answer within the profile's `ask_timeout` and the result says so. The wait holds no model
call. A turn with nobody to answer (a schedule's run, an outside request) is not offered the
tool (`offered_to`), nor is a sub-agent (core/subagents.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from core.tools.base import SafetyTier, Tool, ToolContext

if TYPE_CHECKING:  # core/confirm.py imports core.tools.base: no import cycle at run time
    from core.confirm import Confirmations

__all__ = ["ASK_USER", "AskUserArgs", "ask_user_tool", "offered_to"]

ASK_USER = "ask_user"
# Seconds the tool's own bound adds to the wait, for sending the question and taking the answer.
_GRACE_SECONDS = 30.0


class AskUserArgs(BaseModel):
    """The `ask_user` tool's argument."""

    question: str = Field(
        min_length=1,
        max_length=2_000,
        description="The question, as the person will read it in the chat.",
    )


def ask_user_tool(gate: Confirmations, *, timeout: float) -> Tool[AskUserArgs]:
    """The `ask_user` tool over `gate`; `timeout`: the seconds it waits for an answer."""

    async def run(args: AskUserArgs, context: ToolContext) -> str:
        if context.address is None or context.scheduled or not context.user_id:
            return "Nobody can answer a question in this conversation; go on without asking."
        answer = await gate.ask(args.question, context, wait=timeout)
        if answer is None:
            return (
                f"No answer came within {timeout:g} s. Go on without it, or say what you "
                "still need to know."
            )
        who = answer.user_name or answer.user_id
        # Pictures do not come with an answer (its `control` copy carries none).
        said = answer.model_text or "(a message without text, such as a picture alone)"
        return f"{who} answered: {said}"

    return Tool(
        name=ASK_USER,
        description=(
            "Ask the person you are talking to a question and wait for their reply, when you "
            "cannot go on without it (a missing detail, a choice between options). Their next "
            "message is the result. Ask one short, clear question; do not use it for small talk."
        ),
        args=AskUserArgs,
        # Not read-only: two questions at once in one chat would share one answer.
        tier=SafetyTier.SIDE_EFFECTING,
        run=run,
        timeout=timeout + _GRACE_SECONDS,
    )


def offered_to(tools: Iterable[Tool[Any]], *, scheduled: bool, user_id: str) -> list[Tool[Any]]:
    """`tools` without `ask_user` when nobody is there to answer (a schedule's run, a turn
    asked for from outside)."""
    if scheduled or not user_id:
        return [tool for tool in tools if tool.name != ASK_USER]
    return list(tools)
