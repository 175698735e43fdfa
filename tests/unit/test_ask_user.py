"""The `ask_user` tool: a free question mid-turn, answered by the asker's next message.

The answer is read from the asking turn's own mailbox (core/turn_answers.py): through the
`Worker` with a real SQLite store and the memory mailboxes, and on `Steering` over a claim of
those mailboxes. Nothing reaches the waiting turn on the `control` topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.confirm import Confirmations
from core.envelopes import Address, Inbound, Outbound
from core.messages import ImagePart, Message, ToolCall
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT
from core.outages import Patience
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolContext, ToolRegistry
from core.tools.ask_user import ASK_USER, ask_user_tool, offered_to
from core.turns.steering import Steering
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
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


def said(text: str, user_id: str = "u1", **more: object) -> Inbound:
    return Inbound(
        address=TERMINAL, user_id=user_id, user_name="Alice", text=text, is_direct=True, **more
    )


# --- the question --------------------------------------------------------------------------


async def test_the_question_goes_out_without_an_id_scrubbed(bus: MemoryBus) -> None:
    secret = "sk-live-0123456789abcdef"
    gate = Confirmations(bus=bus, timeout=PATIENCE, redactor=Redactor([secret]))
    await gate.show_question(f"Is {secret} your key?", TERMINAL)
    shown = await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)
    assert shown is not None
    assert isinstance(shown.envelope, Outbound)
    # A question without an id: no Allow/Refuse buttons on any platform.
    assert (shown.envelope.kind, shown.envelope.text, shown.envelope.question) == (
        "question",
        "Is [redacted] your key?",
        None,
    )


@pytest.mark.parametrize(
    "context",
    [
        ToolContext(session_id="s", user_id="u1", address=TERMINAL, scheduled=True, answers=1),
        ToolContext(session_id="s", user_id="", address=TERMINAL, answers=1),
        ToolContext(session_id="s", user_id="u1", answers=1),
        ToolContext(session_id="s", user_id="u1", address=TERMINAL),  # no mailbox to look in
    ],
)
async def test_nobody_is_asked_where_nobody_can_answer(
    bus: MemoryBus, context: ToolContext
) -> None:
    tool = ask_user_tool(Confirmations(bus=bus), timeout=PATIENCE)

    assert "Nobody can answer" in await tool({"question": QUESTION}, context)
    assert await bus.receive(outbound_queue("terminal"), consumer="t", timeout=0) is None


# --- where it is offered -------------------------------------------------------------------


def test_offered_in_the_chat_modes_but_not_without_a_person_or_a_mailbox(bus: MemoryBus) -> None:
    tool = ask_user_tool(Confirmations(bus=bus), timeout=1.0)
    assert all(mode.allows(tool) for mode in (FULL, SAFE_CHAT, DISCORD))
    assert not NO_TOOLS.allows(tool)
    assert offered_to([tool], False, "u1", answers=object()) == [tool]
    assert offered_to([tool], True, "u1", answers=object()) == []
    assert offered_to([tool], False, "", answers=object()) == []
    assert offered_to([tool], False, "u1", answers=None) == []


@pytest.mark.parametrize(("scheduled", "user_id"), [(True, "u1"), (False, ""), (False, "u1")])
async def test_a_turn_with_nobody_to_answer_or_no_mailbox_is_not_offered_the_tool(
    bus: MemoryBus, store: SqlStore, scheduled: bool, user_id: str
) -> None:
    """Run without `arrivals` (no mailbox claim): even the person's own turn is not offered."""
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


# --- where the answer is found: the claimed mailbox ----------------------------------------


async def steering_over(store: SqlStore, *waiting: Inbound) -> tuple[Steering, MemoryMailboxes]:
    mailboxes = MemoryMailboxes()
    for inbound in waiting:
        await mailboxes.put(inbound)
    claim = await mailboxes.claim(TERMINAL.session_key, owner="t")
    assert claim is not None
    head = await claim.head()
    assert head is not None
    steering = Steering(
        claim=claim,
        head=head,
        marks=store,
        policy=ChannelPolicy(),
        mode="queue",  # nothing joins, yet the answer is found
        window=0,
        patience=Patience(),
    )
    return steering, mailboxes


async def test_the_askers_first_message_is_the_answer_a_yes_too(store: SqlStore) -> None:
    """Another person's message keeps its place; a command ends the look (it waits first)."""
    head, other, yes = said("make me a logo"), said("hi", user_id="u2"), said("yes")
    steering, _ = await steering_over(store, head, other, yes, said("and red"))

    found = await steering.answer("u1")
    assert found is not None
    assert (found.inbound, found.message.text) == (yes, "yes")
    assert await steering.joining(2) == []  # busy = "queue": nothing joins

    command = Inbound(kind="command", command="new", text="/new", address=TERMINAL, user_id="u1")
    blocked, _ = await steering_over(store, head, command, said("Blue"))
    assert await blocked.answer("u1") is None


async def test_an_answer_taken_before_a_crash_is_only_taken_out(store: SqlStore) -> None:
    head, taken, answer = said("make me a logo"), said("Blue"), said("Green")
    steering, mailboxes = await steering_over(store, head, taken, answer)
    await store.mark_processed(taken.dedupe_key)

    found = await steering.answer("u1")
    assert found is not None and found.inbound == answer
    assert [inbound.id for inbound in mailboxes.boxes[TERMINAL.session_key]] == [
        head.id,
        answer.id,
    ]


# --- through the worker --------------------------------------------------------------------


def make_worker(
    bus: MemoryBus, store: SqlStore, *, wait: float = PATIENCE
) -> tuple[Worker, ScriptedProvider]:
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
        tools=ToolRegistry([ask_user_tool(gate, timeout=wait)]),
        store=store,
        confirm=gate.confirm,
    )
    policy = ChannelPolicy(modes={"terminal": "safe-chat"}, local_platforms=frozenset({"terminal"}))
    worker = build_worker(bus=bus, store=store, runtime=runtime, confirmations=gate, policy=policy)
    return worker, provider


async def asked_and_answered(worker: Worker, bus: MemoryBus, *answers: Inbound) -> None:
    outbox = Outbox(bus)
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, said("make me a logo"))
        question = await outbox.until(QUESTION)
        assert question.kind == "question"
        await hand_in(worker, *answers)
        await outbox.until("Done.", "reply")
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)


async def test_the_answer_is_the_tools_result_and_no_turn_of_its_own(
    bus: MemoryBus, store: SqlStore
) -> None:
    worker, provider = make_worker(bus, store)
    answer = said("Blue")
    await asked_and_answered(worker, bus, answer)

    assert len(provider.requests) == 2  # the answer started no turn
    assert provider.requests[1].messages[-1].text == "Alice answered: Blue"
    session = await store.current_session(TERMINAL.session_key)
    messages = await store.list_messages(session.id)
    assert [m.text for m in messages if m.role == "user"] == ["make me a logo"]
    assert [m.text for m in messages if m.role == "tool"] == ["Alice answered: Blue"]
    assert await store.is_processed(answer.dedupe_key)
    assert await worker.mailboxes.pending() == []


async def test_an_answer_without_text_is_said_to_be_one(bus: MemoryBus, store: SqlStore) -> None:
    worker, provider = make_worker(bus, store)
    picture = ImagePart(media_type="image/png", data=b"\x89PNG" + b"0" * 100)
    await asked_and_answered(worker, bus, said("", images=[picture]))

    assert provider.requests[1].messages[-1].text == (
        "Alice answered: (a message without text, such as a picture alone)"
    )


async def test_silence_is_no_answer(bus: MemoryBus, store: SqlStore) -> None:
    worker, provider = make_worker(bus, store, wait=0.05)
    await asked_and_answered(worker, bus)

    assert "No answer came within 0.05 s" in provider.requests[1].messages[-1].text


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
