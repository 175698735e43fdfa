"""The confirmation gate for privileged tools: the bot asks in the chat, the user answers.

`Confirmations.confirm` is the runtime's `confirm` callback: it sends the question as a
`question` Outbound (adapters show it with native Allow/Refuse buttons, whose presses come
back as `answer` Inbounds) and waits for the answer of the person whose turn it is. A typed
yes/no answers as well. No answer in time means no.

The answer must reach the worker whose turn waits, in any deployment. It cannot wait in the
session's mailbox (behind the very turn that asks), so whoever accepts an answer publishes it
on the `control` topic (`core/mailbox/intake.py`), which every worker hears; the one holding
the question takes it (`answer`). A button press goes only there. A typed yes/no is also an
ordinary message when no question waits, so it goes in the mailbox as well, and the worker
that takes it as an answer marks it processed first: when the mailbox reaches it after the
turn, it is skipped instead of starting a turn.

Each question and each decision is a lifecycle event (`confirm.request`, `confirm.decision`),
scrubbed of secrets, and the question's message is edited to show the decision (`decision`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from core.bus.base import Bus
from core.bus.names import EVENTS, outbound_queue
from core.envelopes import Address, EventEnvelope, Inbound, Outbound, new_id
from core.events import LIFECYCLE_NAMES, ConfirmationDecided, ConfirmationRequested
from core.messages import ToolCall
from core.redact import Redactor
from core.store.processed import ProcessedMarks
from core.tools.base import ToolContext

__all__ = [
    "ANSWERS",
    "BUTTONS",
    "Confirm",
    "Confirmations",
    "answer_inbound",
    "button_value",
    "parse_answer",
    "read_button",
]

log = logging.getLogger(__name__)

# Whether the user allows the call the runtime is about to make (False: refused).
Confirm = Callable[[ToolCall, ToolContext], Coroutine[Any, Any, bool]]

ANSWERS = {"yes": True, "y": True, "no": False, "n": False}
# The native buttons every platform shows under a question: label and the answer it gives.
BUTTONS: tuple[tuple[str, bool], ...] = (("Allow", True), ("Refuse", False))
# Marks a button's value (Telegram callback data, Slack action value, Discord custom id) as
# ours; short because Telegram allows 64 bytes of callback data.
_BUTTON_PREFIX = "sbq"


def parse_answer(text: str) -> bool | None:
    """True for yes/y, False for no/n (any case, surrounding blanks ignored), None otherwise."""
    return ANSWERS.get(text.strip().lower())


def button_value(question_id: str, allowed: bool) -> str:
    """What a button of question `question_id` carries back when pressed."""
    return f"{_BUTTON_PREFIX}:{question_id}:{'yes' if allowed else 'no'}"


def read_button(value: str) -> tuple[str, bool] | None:
    """`(question id, allowed)` from a pressed button's value; None if it is not ours."""
    prefix, _, rest = value.partition(":")
    question_id, _, answer = rest.partition(":")
    if prefix != _BUTTON_PREFIX or not question_id or answer not in ("yes", "no"):
        return None
    return question_id, answer == "yes"


def answer_inbound(
    value: str,
    *,
    address: Address,
    user_id: str,
    user_name: str,
    press_id: str,
    is_direct: bool = False,
    team: str | None = None,
) -> Inbound | None:
    """The `answer` Inbound for a button press (`press_id`: the platform's id of the press);
    None when the button is not one of ours."""
    read = read_button(value)
    if read is None:
        return None
    question_id, allowed = read
    return Inbound(
        kind="answer",
        address=address,
        user_id=user_id,
        user_name=user_name,
        text="yes" if allowed else "no",
        question=question_id,
        is_direct=is_direct,
        mentions_bot=True,
        team=team,
        platform_message_id=f"press:{press_id}",
    )


class _Question:
    def __init__(self, question_id: str, user_id: str) -> None:
        self.id = question_id
        self.user_id = user_id
        self.answer: asyncio.Future[Inbound] = asyncio.get_running_loop().create_future()


class Confirmations:
    """Questions waiting for a user's yes or no, at most one per session (by session key)."""

    def __init__(
        self,
        *,
        bus: Bus,
        timeout: float = 60.0,
        marks: ProcessedMarks | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """`marks` (the store) records a typed answer as processed so its mailbox copy is
        skipped; `redactor` scrubs the lifecycle events."""
        self.bus = bus
        self.timeout = timeout
        self._marks = marks
        self._redact = redactor or Redactor()
        self._waiting: dict[str, _Question] = {}

    async def confirm(self, call: ToolCall, context: ToolContext) -> bool:
        """Ask the chat of `context` whether `call` may run; False on no, silence or no chat."""
        address = context.address
        if address is None or context.scheduled:
            return False  # nobody is there to answer
        key = address.session_key
        question = self._waiting[key] = _Question(new_id()[:16], context.user_id)
        shown = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
        summary = f"I'd like to run {call.name}({shown})."
        try:
            await self._event(
                ConfirmationRequested(
                    question_id=question.id,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    user_id=context.user_id,
                    timeout_s=self.timeout,
                ),
                context,
            )
            await self._show(
                address,
                "question",
                question.id,
                f"{summary} Reply yes to allow or no to refuse ({self.timeout:g} s).",
            )
            try:
                async with asyncio.timeout(self.timeout):
                    answer: Inbound | None = await question.answer
            except TimeoutError:
                log.info("no answer to the confirmation of %s in %s", call.name, key)
                answer = None
        finally:
            if self._waiting.get(key) is question:
                del self._waiting[key]
        allowed = answer is not None and parse_answer(answer.text) is True
        await self._event(_decided(question.id, call, answer, allowed), context)
        try:
            await self._show(address, "decision", question.id, f"{summary}\n{self._line(answer)}")
        except Exception:
            # Showing the decision is a courtesy: the answer stands even if the bus is away.
            log.warning("could not show the decision on question %s", question.id, exc_info=True)
        return allowed

    async def show_question(self, text: str, address: Address) -> None:
        """Send `ask_user`'s free question `text` to the chat at `address`, scrubbed of the
        configured secrets as the model's answers are. No id, so no buttons: its answer is the
        asker's next message, read from the turn's own mailbox (core/turn_answers.py), not
        taken here."""
        await self.bus.enqueue(
            outbound_queue(address.platform),
            Outbound(kind="question", address=address, text=self._redact.known(text)),
        )

    def is_answer(self, inbound: Inbound) -> bool:
        """Whether `inbound` answers a question waiting here: the asker's own yes or no,
        typed or a press of that question's button."""
        question = self._waiting.get(inbound.session_key)
        if question is None or not self._may_answer(question, inbound):
            return False
        if inbound.kind == "answer":
            return inbound.question == question.id and parse_answer(inbound.text) is not None
        return inbound.kind == "message" and parse_answer(inbound.text) is not None

    @staticmethod
    def could_answer(inbound: Inbound) -> bool:
        """Whether `inbound` is shaped like an answer (a press, a typed yes/no), so a question
        waiting on another worker may want it."""
        if inbound.kind == "answer":
            return True
        return inbound.kind == "message" and parse_answer(inbound.text) is not None

    async def answer(self, inbound: Inbound) -> bool:
        """Give `inbound`'s yes or no to the question it answers; False if none waits here."""
        if not self.is_answer(inbound):
            return False
        question = self._waiting[inbound.session_key]
        if question.answer.done():
            return False
        if inbound.kind == "message" and self._marks is not None:
            # A copy may wait in the mailbox (put there by a worker that did not hold the
            # question): marked, it is skipped there instead of starting a turn "yes".
            try:
                await self._marks.mark_processed(inbound.dedupe_key)
            except Exception:
                log.warning("could not mark the answer %s processed", inbound.id, exc_info=True)
        if not question.answer.done():
            question.answer.set_result(inbound)
        return True

    def _may_answer(self, question: _Question, inbound: Inbound) -> bool:
        """Only the person whose turn asked may answer (`inbound.user_id` is who answered)."""
        return inbound.user_id == question.user_id

    def _line(self, answer: Inbound | None) -> str:
        if answer is None:
            return f"No answer within {self.timeout:g} s: refused."
        who = answer.user_name or answer.user_id
        verdict = "Allowed" if parse_answer(answer.text) else "Refused"
        return f"{verdict} by {who}." if who else f"{verdict}."

    async def _show(
        self, address: Address, kind: Literal["question", "decision"], question_id: str, text: str
    ) -> None:
        await self.bus.enqueue(
            outbound_queue(address.platform),
            Outbound(
                kind=kind,
                address=address,
                text=text,
                question=question_id,
                # The question's message is recorded under this key, so the decision finds it.
                reply_key=f"question:{question_id}" if kind == "question" else None,
            ),
        )

    async def _event(
        self, event: ConfirmationRequested | ConfirmationDecided, context: ToolContext
    ) -> None:
        """Fan a confirmation event out on `events`, scrubbed; best effort, never raises."""
        data = self._redact.data(event.model_dump(mode="json", exclude={"kind"}))
        data["platform"] = context.platform
        address = context.address
        try:
            await self.bus.publish(
                EVENTS,
                EventEnvelope(
                    name=LIFECYCLE_NAMES[type(event)],
                    session_id=context.session_id,
                    run_id=context.run_id,
                    session_key=address.session_key if address else "",
                    data=data,
                ),
            )
        except Exception:
            log.warning("could not publish a confirmation event", exc_info=True)


def _decided(
    question_id: str, call: ToolCall, answer: Inbound | None, allowed: bool
) -> ConfirmationDecided:
    if answer is None:
        return ConfirmationDecided(
            question_id=question_id,
            call_id=call.id,
            name=call.name,
            allowed=False,
            reason="timeout",
        )
    return ConfirmationDecided(
        question_id=question_id,
        call_id=call.id,
        name=call.name,
        allowed=allowed,
        reason="answered",
        answered_by=answer.user_id,
        via="button" if answer.kind == "answer" else "text",
    )
