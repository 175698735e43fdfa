"""The confirmation gate's transport: button values, answers by press, lifecycle events and the
decision that replaces the question, over the real `MemoryBus`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.bus import EVENTS, outbound_queue
from core.bus.base import BusPayload, Subscription
from core.confirm import Confirmations, answer_inbound, button_value, read_button
from core.envelopes import Address, EventEnvelope, Inbound, Outbound
from core.errors import BusError
from core.messages import ToolCall
from core.redact import Redactor
from core.tools import ToolContext
from tests.backends.memory_bus import MemoryBus

PATIENCE = 5.0
CHAT = Address(platform="telegram", bot="b", chat="42")
CONTEXT = ToolContext(session_id="s1", run_id="r1", user_id="u1", platform="telegram", address=CHAT)
SECRET = "sk-ant-" + "x" * 40


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def next_outbound(bus: MemoryBus) -> Outbound:
    delivery = await bus.receive(outbound_queue("telegram"), consumer="t", timeout=PATIENCE)
    assert delivery is not None
    await delivery.ack()
    assert isinstance(delivery.envelope, Outbound)
    return delivery.envelope


async def events(subscription: Subscription, count: int) -> list[EventEnvelope]:
    seen: list[EventEnvelope] = []
    async with asyncio.timeout(PATIENCE):
        async for envelope in subscription:
            assert isinstance(envelope, EventEnvelope)
            seen.append(envelope)
            if len(seen) == count:
                break
    return seen


def press(question_id: str, allowed: bool, user_id: str = "u1") -> Inbound:
    found = answer_inbound(
        button_value(question_id, allowed),
        address=CHAT,
        user_id=user_id,
        user_name="Alice",
        press_id="p1",
    )
    assert found is not None
    return found


def test_a_button_value_reads_back_and_others_are_not_ours() -> None:
    assert read_button(button_value("abc", True)) == ("abc", True)
    assert read_button(button_value("abc", False)) == ("abc", False)
    assert len(button_value("0123456789abcdef", False)) <= 64  # Telegram's callback data
    for value in ("", "sbq", "sbq::yes", "sbq:abc:maybe", "other:abc:yes"):
        assert read_button(value) is None
    assert answer_inbound("x", address=CHAT, user_id="u", user_name="", press_id="p") is None


async def test_a_press_answers_with_who_pressed_and_the_question_is_replaced(
    bus: MemoryBus,
) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE, redactor=Redactor([SECRET]))
    subscription = await bus.subscribe(EVENTS)
    call = ToolCall(id="c1", name="shell", arguments={"command": f"echo {SECRET}"})
    asking = asyncio.create_task(gate.confirm(call, CONTEXT))

    question = await next_outbound(bus)
    assert question.kind == "question" and question.question is not None
    assert question.reply_key == f"question:{question.question}"
    assert not await gate.answer(press("some-older-question", True))
    assert not await gate.answer(press(question.question, True, user_id="u2"))
    assert await gate.answer(press(question.question, True))
    assert await asking is True

    decision = await next_outbound(bus)
    assert decision.kind == "decision" and decision.question == question.question
    assert decision.text.endswith("\nAllowed by Alice.")
    request, decided = await events(subscription, 2)
    assert (request.name, decided.name) == ("confirm.request", "confirm.decision")
    assert (request.session_id, request.run_id, request.session_key) == (
        "s1",
        "r1",
        "telegram:b:42",
    )
    assert SECRET not in str(request.data) and "[redacted]" in str(request.data)
    assert request.data["user_id"] == "u1"
    assert decided.data["allowed"] is True
    assert (decided.data["answered_by"], decided.data["via"]) == ("u1", "button")
    await subscription.aclose()


async def test_silence_is_a_refusal_event_and_decision(bus: MemoryBus) -> None:
    gate = Confirmations(bus=bus, timeout=0.05)
    subscription = await bus.subscribe(EVENTS)

    allowed = await gate.confirm(ToolCall(id="c1", name="shell", arguments={}), CONTEXT)

    assert allowed is False
    await next_outbound(bus)  # the question
    decision = await next_outbound(bus)
    assert decision.text.endswith("No answer within 0.05 s: refused.")
    _, decided = await events(subscription, 2)
    assert decided.data["allowed"] is False
    assert decided.data["reason"] == "timeout"
    await subscription.aclose()


async def test_a_typed_answer_is_marked_processed_so_its_mailbox_copy_is_skipped(
    bus: MemoryBus, store: SqlStore
) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE, marks=store)
    asking = asyncio.create_task(
        gate.confirm(ToolCall(id="c1", name="shell", arguments={}), CONTEXT)
    )
    await next_outbound(bus)
    typed = Inbound(address=CHAT, user_id="u1", text="no", platform_message_id="9")

    assert await gate.answer(typed)

    assert await asking is False
    assert await store.is_processed(typed.dedupe_key)


class DecisionsRefused(MemoryBus):
    """A bus that takes the question but not the decision (as if Redis went away then)."""

    async def enqueue(
        self,
        queue: str,
        envelope: BusPayload,
        *,
        dedupe_id: str | None = None,
    ) -> str | None:
        if isinstance(envelope, Outbound) and envelope.kind == "decision":
            raise BusError("the bus is away")
        return await super().enqueue(queue, envelope, dedupe_id=dedupe_id)


async def test_the_answer_stands_when_the_decision_cannot_be_shown() -> None:
    bus = DecisionsRefused()
    try:
        gate = Confirmations(bus=bus, timeout=PATIENCE)
        asking = asyncio.create_task(
            gate.confirm(ToolCall(id="c1", name="shell", arguments={}), CONTEXT)
        )
        question = await next_outbound(bus)
        assert question.question is not None

        assert await gate.answer(press(question.question, True))

        assert await asking is True
    finally:
        await bus.close()
