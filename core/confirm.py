"""The confirmation gate for privileged tools: the bot asks in the chat, the user answers.

`Confirmations.confirm` is the runtime's `confirm` callback: it sends the question as a
`notice` and waits for the answer of the person whose turn it is. The answer ("yes"/"no")
cannot wait in the session's mailbox behind the very turn that asks, so the worker takes it
off the inbound queue itself (`is_answer`), passes it on the `control` topic and hands it to
`answer` on the worker running the turn. No answer in time means no.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Inbound, Outbound
from core.messages import ToolCall
from core.tools.base import ToolContext

__all__ = ["ANSWERS", "Confirm", "Confirmations", "parse_answer"]

log = logging.getLogger(__name__)

# Whether the user allows the call the runtime is about to make (False: refused).
Confirm = Callable[[ToolCall, ToolContext], Coroutine[Any, Any, bool]]

ANSWERS = {"yes": True, "y": True, "no": False, "n": False}


def parse_answer(text: str) -> bool | None:
    """True for yes/y, False for no/n (any case, surrounding blanks ignored), None otherwise."""
    return ANSWERS.get(text.strip().lower())


class _Question:
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()


class Confirmations:
    """Questions waiting for a user's yes or no, at most one per session (by session key)."""

    def __init__(self, *, bus: Bus, timeout: float = 60.0) -> None:
        self.bus = bus
        self.timeout = timeout
        self._waiting: dict[str, _Question] = {}

    async def confirm(self, call: ToolCall, context: ToolContext) -> bool:
        """Ask the chat of `context` whether `call` may run; False on no, silence or no chat."""
        address = context.address
        if address is None or context.scheduled:
            return False  # nobody is there to answer
        key = address.session_key
        question = self._waiting[key] = _Question(context.user_id)
        try:
            shown = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
            await self.bus.enqueue(
                outbound_queue(address.platform),
                Outbound(
                    kind="question",
                    address=address,
                    text=(
                        f"I'd like to run {call.name}({shown}). Reply yes to allow or no to "
                        f"refuse ({self.timeout:g} s)."
                    ),
                ),
            )
            try:
                async with asyncio.timeout(self.timeout):
                    return await question.answer
            except TimeoutError:
                log.info("no answer to the confirmation of %s in %s", call.name, key)
                return False
        finally:
            if self._waiting.get(key) is question:
                del self._waiting[key]

    def is_answer(self, inbound: Inbound) -> bool:
        """Whether `inbound` answers a question waiting here (the asker's own yes or no)."""
        question = self._waiting.get(inbound.session_key)
        return (
            question is not None
            and inbound.kind == "message"
            and inbound.user_id == question.user_id
            and parse_answer(inbound.text) is not None
        )

    def answer(self, inbound: Inbound) -> bool:
        """Give `inbound`'s yes or no to the question it answers; False if none waits here."""
        if not self.is_answer(inbound):
            return False
        question = self._waiting[inbound.session_key]
        allowed = parse_answer(inbound.text)
        if question.answer.done() or allowed is None:
            return False
        question.answer.set_result(allowed)
        return True
