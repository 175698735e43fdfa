"""The `ask_user` tool: the model asks the person a question mid-turn and waits for the answer.

The question goes to the chat without buttons (`Confirmations.show_question`,
core/confirm.py). The turn that asks holds its session's mailbox claim, and the asker's next
message comes into that mailbox as every message does: the tool looks there for it
(`ToolContext.answers`, core/turn_answers.py) until the profile's `ask_timeout`, and takes it as
a joined message is taken, marked processed so it starts no turn of its own. Its text is the
tool's result. The wait holds no model call. A turn with nobody to answer (a schedule's run, an
outside request) or with no mailbox to look in is not offered the tool (`offered_to`), nor is
a sub-agent (core/subagents.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from core.tools.base import SafetyTier, Tool, ToolContext

if TYPE_CHECKING:  # core/confirm.py imports core.tools.base: no import cycle at run time
    from core.confirm import Confirmations
    from core.turn_answers import TurnAnswers

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
    """The `ask_user` tool, its question shown through `gate`; `timeout`: the seconds it waits
    for an answer."""

    async def run(args: AskUserArgs, context: ToolContext) -> str:
        answers: TurnAnswers | None = context.answers
        address = context.address
        if address is None or context.scheduled or not context.user_id or answers is None:
            return "Nobody can answer a question in this conversation; go on without asking."
        await gate.show_question(args.question, address)
        answer = await answers.next_from(context.user_id, within=timeout)
        if answer is None:
            return (
                f"No answer came within {timeout:g} s. Go on without it, or say what you "
                "still need to know."
            )
        who = answer.inbound.user_name or answer.inbound.user_id
        # The result is text: pictures sent with the answer are not passed on.
        said = answer.message.text or "(a message without text, such as a picture alone)"
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


def offered_to(
    tools: Iterable[Tool[Any]], scheduled: bool, user_id: str, *, answers: object
) -> list[Tool[Any]]:
    """`tools` without `ask_user` when nobody is there to answer (a schedule's run, a turn
    asked for from outside) or there is no mailbox to find the answer in (`answers` None)."""
    if scheduled or not user_id or answers is None:
        return [tool for tool in tools if tool.name != ASK_USER]
    return list(tools)
