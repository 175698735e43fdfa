"""The `ask_user` tool: a free question mid-turn, answered by the asker's next message.

On the gate (`Confirmations.ask`) over the real `MemoryBus`, and through the `Worker` with a
real SQLite store, where the answer reaches the waiting turn on the `control` topic and its
mailbox copy, marked processed, never starts a turn of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.confirm import Confirmations
from core.envelopes import Address, Inbound, Outbound
from core.messages import Message, ToolCall
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolContext, ToolRegistry
from core.tools.ask_user import ASK_USER, ask_user_tool, offered_to
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
TERMINAL = Address(platform="terminal", chat="alice")
QUESTION = "Which colour should the logo be?"


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


def said(text: str, user_id: str = "u1") -> Inbound:
    return Inbound(address=TERMINAL, user_id=user_id, user_name="Alice", text=text, is_direct=True)


CONTEXT = ToolContext(session_id="s", user_id="u1", platform="terminal", address=TERMINAL)


# --- the gate ------------------------------------------------------------------------------


async def test_the_askers_next_message_answers_and_is_marked_processed(
    bus: MemoryBus, store: SqlStore
) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE, marks=store)
    asking = asyncio.create_task(gate.ask(QUESTION, CONTEXT, wait=PATIENCE))
    shown = await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)
    assert shown is not None
    question = shown.envelope
    assert isinstance(question, Outbound)
    # A question without an id: no Allow/Refuse buttons on any platform.
    assert (question.kind, question.text, question.question) == (
        "question",
        QUESTION,
        None,
    )
    command = Inbound(kind="command", command="new", text="/new", address=TERMINAL, user_id="u1")
    assert not await gate.answer(said("Blue", user_id="u2"))  # only the asker answers
    assert not await gate.answer(command)  # a command is no answer
    answer = said("Blue, please")
    assert await gate.answer(answer)

    assert await asking == answer
    assert await store.is_processed(answer.dedupe_key)
    assert not gate.is_answer(said("more"))  # nothing waits any more


async def test_silence_is_no_answer(bus: MemoryBus) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE)

    assert await gate.ask(QUESTION, CONTEXT, wait=0.05) is None
    assert not gate.is_answer(said("late"))


async def test_a_free_question_does_not_take_a_yes_for_a_confirmation(bus: MemoryBus) -> None:
    """A confirmation still waits for yes or no: any other text is no answer to it."""
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    asking = asyncio.create_task(gate.confirm(ToolCall(id="c", name="wipe"), CONTEXT))
    assert await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)

    assert not await gate.answer(said("Blue"))
    assert await gate.answer(said("yes"))
    assert await asking is True


@pytest.mark.parametrize(
    "context",
    [
        ToolContext(session_id="s", user_id="u1", address=TERMINAL, scheduled=True),
        ToolContext(session_id="s", user_id="", address=TERMINAL),
        ToolContext(session_id="s", user_id="u1"),
    ],
)
async def test_nobody_is_asked_where_nobody_can_answer(
    bus: MemoryBus, context: ToolContext
) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    tool = ask_user_tool(gate, timeout=PATIENCE)

    assert "Nobody can answer" in await tool({"question": QUESTION}, context)
    assert await gate.ask(QUESTION, context, wait=PATIENCE) is None
    assert await bus.receive(outbound_queue("terminal"), consumer="t", timeout=0) is None


# --- where it is offered -------------------------------------------------------------------


def test_offered_in_the_chat_modes_but_not_without_a_person(bus: MemoryBus) -> None:
    tool = ask_user_tool(Confirmations(bus=bus), timeout=1.0)
    assert all(mode.allows(tool) for mode in (FULL, SAFE_CHAT, DISCORD))
    assert not NO_TOOLS.allows(tool)
    assert offered_to([tool], scheduled=False, user_id="u1") == [tool]
    assert offered_to([tool], scheduled=True, user_id="u1") == []
    assert offered_to([tool], scheduled=False, user_id="") == []


# --- through the worker --------------------------------------------------------------------


def make_worker(bus: MemoryBus, store: SqlStore) -> tuple[Worker, ScriptedProvider]:
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name=ASK_USER, arguments={"question": QUESTION})),
            text_reply("Done."),
        ]
    )
    gate = Confirmations(bus=bus, timeout=PATIENCE, marks=store)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([ask_user_tool(gate, timeout=PATIENCE)]),
        store=store,
        confirm=gate.confirm,
    )
    policy = ChannelPolicy(modes={"terminal": "safe-chat"}, local_platforms=frozenset({"terminal"}))
    worker = build_worker(bus=bus, store=store, runtime=runtime, confirmations=gate, policy=policy)
    return worker, provider


async def test_the_answer_is_the_tools_result_and_no_turn_of_its_own(
    bus: MemoryBus, store: SqlStore
) -> None:
    worker, provider = make_worker(bus, store)
    outbox = Outbox(bus)
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, said("make me a logo"))
        question = await outbox.until(QUESTION)
        assert question.kind == "question"
        await hand_in(worker, said("Blue"))
        await outbox.until("Done.", "reply")
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    assert len(provider.requests) == 2  # the answer started no turn
    assert provider.requests[1].messages[-1].text == "Alice answered: Blue"
    session = await store.current_session(TERMINAL.session_key)
    messages = await store.list_messages(session.id)
    assert [m.text for m in messages if m.role == "user"] == ["make me a logo"]
    assert [m.text for m in messages if m.role == "tool"] == ["Alice answered: Blue"]


async def test_a_stop_while_waiting_ends_the_turn(bus: MemoryBus, store: SqlStore) -> None:
    worker, provider = make_worker(bus, store)
    outbox = Outbox(bus)
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, said("make me a logo"))
        await outbox.until(QUESTION)
        stop = Inbound(kind="command", command="stop", text="/stop", address=TERMINAL, user_id="u1")
        await hand_in(worker, stop)
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    assert len(provider.requests) == 1  # the model was not asked again
    assert not worker.confirmations or not worker.confirmations.is_answer(said("Blue"))


@pytest.mark.parametrize(("scheduled", "user_id"), [(True, "u1"), (False, "")])
async def test_a_turn_with_nobody_to_answer_is_not_offered_the_tool(
    bus: MemoryBus, store: SqlStore, scheduled: bool, user_id: str
) -> None:
    provider = ScriptedProvider([text_reply("Done.")])
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([ask_user_tool(Confirmations(bus=bus), timeout=PATIENCE)]),
        store=store,
    )
    session = await store.current_session(TERMINAL.session_key)
    context = ChannelContext(
        platform="terminal",
        mode=SAFE_CHAT,
        session_key=TERMINAL.session_key,
        user_id=user_id,
        address=TERMINAL,
        scheduled=scheduled,
    )
    [_ async for _ in runtime.run(session.id, Message.user("hello"), context)]

    assert provider.requests[0].tools == []


async def test_an_answer_without_text_is_said_to_be_one(bus: MemoryBus) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    tool = ask_user_tool(gate, timeout=PATIENCE)
    asking = asyncio.create_task(tool({"question": QUESTION}, CONTEXT))
    assert await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)

    assert await gate.answer(said(""))
    assert await asking == "Alice answered: (a message without text, such as a picture alone)"


async def test_the_question_shown_is_scrubbed_of_the_configured_secrets(bus: MemoryBus) -> None:
    secret = "sk-live-0123456789abcdef"
    gate = Confirmations(bus=bus, timeout=PATIENCE, redactor=Redactor([secret]))
    asking = asyncio.create_task(gate.ask(f"Is {secret} your key?", CONTEXT, wait=PATIENCE))
    shown = await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)
    assert shown is not None
    assert isinstance(shown.envelope, Outbound)
    assert shown.envelope.text == "Is [redacted] your key?"
    assert await gate.answer(said("no"))
    assert (await asking) is not None
