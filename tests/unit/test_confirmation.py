"""The confirmation gate for privileged tools.

In the runtime, with a fake `confirm` callback; and through the `Worker` over the real
`MemoryBus`, where the user's yes or no reaches the waiting turn without passing through the
session's mailbox (it would wait there behind the very turn that asks).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import pytest

from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.confirm import Confirmations, parse_answer
from core.envelopes import Address, Inbound
from core.events import AgentEvent, RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import FULL, NO_TOOLS, SAFE_CHAT, CapabilityMode
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolContext, ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.confirming import script, wipe_tool
from tests.workers import Outbox, build_worker, hand_in

# How long a test waits for something that should happen at once before it fails instead of
# hanging; only reached when the behaviour under test is broken.
PATIENCE = 5.0
TERMINAL = Address(platform="terminal", chat="alice")


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


# --- the runtime ---------------------------------------------------------------------------


class FakeConfirm:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[ToolCall, ToolContext]] = []

    async def __call__(self, call: ToolCall, context: ToolContext) -> bool:
        self.asked.append((call, context))
        return self.answer


async def runtime_turn(
    store: SqlStore, ran: list[str], confirm: FakeConfirm | None, mode: CapabilityMode = FULL
) -> tuple[list[AgentEvent], ScriptedProvider]:
    provider = ScriptedProvider(script())
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([wipe_tool(ran)]),
        store=store,
        confirm=confirm,
    )
    session = await store.current_session("terminal:default:alice")
    context = ChannelContext(
        platform="terminal", mode=mode, session_key="terminal:default:alice", user_id="u1"
    )
    events = [e async for e in runtime.run(session.id, Message.user("wipe it"), context)]
    return events, provider


def finished(events: list[AgentEvent]) -> ToolFinished:
    return next(e for e in events if isinstance(e, ToolFinished))


async def test_an_allowed_privileged_call_runs(store: SqlStore) -> None:
    ran: list[str] = []
    confirm = FakeConfirm(True)

    events, provider = await runtime_turn(store, ran, confirm)

    assert ran == ["/tmp/x"]
    assert [(c.name, c.arguments, ctx.user_id) for c, ctx in confirm.asked] == [
        ("wipe", {"path": "/tmp/x"}, "u1")
    ]
    assert (finished(events).output, finished(events).is_error) == ("wiped /tmp/x", False)
    assert provider.requests[1].messages[-1].text == "wiped /tmp/x"
    assert isinstance(events[-1], RunCompleted)


async def test_a_refused_privileged_call_does_not_run_and_the_model_reads_why(
    store: SqlStore,
) -> None:
    ran: list[str] = []

    events, provider = await runtime_turn(store, ran, FakeConfirm(False))

    assert ran == []
    result = finished(events)
    assert result.is_error is True
    assert result.output.startswith("The user refused.")
    assert provider.requests[1].messages[-1].text == result.output
    assert isinstance(events[-1], RunCompleted)


async def test_without_a_confirm_callback_privileged_calls_are_refused_as_before(
    store: SqlStore,
) -> None:
    ran: list[str] = []

    events, _ = await runtime_turn(store, ran, None)

    assert ran == []
    assert "needs a confirmation" in finished(events).output


@pytest.mark.parametrize("mode", [SAFE_CHAT, NO_TOOLS])
async def test_restricted_modes_refuse_privileged_calls_without_asking(
    store: SqlStore, mode: CapabilityMode
) -> None:
    ran: list[str] = []
    confirm = FakeConfirm(True)

    events, _ = await runtime_turn(store, ran, confirm, mode)

    assert ran == []
    assert confirm.asked == []
    assert "not available in this chat" in finished(events).output


# --- the gate on its own -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [("yes", True), (" Y ", True), ("YES", True), ("no", False), ("N", False), ("yes!", None)],
)
def test_answers_are_yes_or_no_in_any_case(text: str, answer: bool | None) -> None:
    assert parse_answer(text) is answer


async def test_only_the_asker_answers_and_only_while_a_question_waits(bus: MemoryBus) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    context = ToolContext(session_id="s", user_id="u1", platform="terminal", address=TERMINAL)
    call = ToolCall(id="c1", name="wipe", arguments={})
    other = Inbound(address=TERMINAL, user_id="u2", text="yes")
    mine = Inbound(address=TERMINAL, user_id="u1", text="yes")
    assert not gate.is_answer(mine)

    asking = asyncio.create_task(gate.confirm(call, context))
    notice = await bus.receive(outbound_queue("terminal"), consumer="t", timeout=PATIENCE)
    assert notice is not None

    assert not await gate.answer(other)
    assert await gate.answer(mine)
    assert await asking is True
    assert not gate.is_answer(mine)


async def test_a_scheduled_turn_is_never_asked(bus: MemoryBus) -> None:
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    context = ToolContext(session_id="s", address=TERMINAL, scheduled=True)

    assert await gate.confirm(ToolCall(id="c1", name="wipe", arguments={}), context) is False


# --- through the worker --------------------------------------------------------------------


def make_worker(
    bus: MemoryBus, store: SqlStore, steps: Iterable[ScriptStep], ran: list[str], timeout: float
) -> tuple[Worker, ScriptedProvider]:
    provider = ScriptedProvider(steps)
    # As `bots/app.py` builds it: a typed answer is marked processed, so its mailbox copy is
    # skipped.
    gate = Confirmations(bus=bus, timeout=timeout, marks=store)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([wipe_tool(ran)]),
        store=store,
        confirm=gate.confirm,
    )
    # The terminal's chats run in `full` (its spec's default mode), where privileged tools ask;
    # the terminal is the operator's own chat, whose writer is an admin.
    policy = ChannelPolicy(modes={"terminal": "full"}, local_platforms=frozenset({"terminal"}))
    worker = build_worker(bus=bus, store=store, runtime=runtime, confirmations=gate, policy=policy)
    return worker, provider


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)


def said(text: str) -> Inbound:
    return Inbound(address=TERMINAL, user_id="u1", user_name="Alice", text=text, is_direct=True)


async def answered_turn(
    bus: MemoryBus, store: SqlStore, answer: str | None, wait: float = PATIENCE
) -> tuple[list[str], ScriptedProvider, Outbox, str]:
    """A turn whose privileged call asks; `answer` is sent while it waits (None: silence)."""
    ran: list[str] = []
    worker, provider = make_worker(bus, store, script(), ran, wait)
    outbox = Outbox(bus)
    async with running(worker):
        await hand_in(worker, said("wipe it"))
        question = await outbox.until("I'd like to run")
        assert question.kind == "question"
        assert question.text == (
            f"I'd like to run wipe(path='/tmp/x'). Reply yes to allow or no to refuse ({wait:g} s)."
        )
        if answer is not None:
            await hand_in(worker, said(answer))
        await outbox.until("Finished.", "reply")
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    session = await store.current_session(TERMINAL.session_key)
    result = next(m for m in await store.list_messages(session.id) if m.role == "tool")
    return ran, provider, outbox, result.text


async def test_a_yes_while_the_turn_waits_lets_the_tool_run(
    bus: MemoryBus, store: SqlStore
) -> None:
    ran, provider, _, result = await answered_turn(bus, store, "Yes")

    assert ran == ["/tmp/x"]
    assert result == "wiped /tmp/x"
    # The yes was an answer, not a turn of its own: two model calls, one user message.
    assert len(provider.requests) == 2
    session = await store.current_session(TERMINAL.session_key)
    users = [m.text for m in await store.list_messages(session.id) if m.role == "user"]
    assert users == ["wipe it"]


async def test_a_no_refuses_the_call(bus: MemoryBus, store: SqlStore) -> None:
    ran, provider, _, result = await answered_turn(bus, store, "n")

    assert ran == []
    assert result.startswith("The user refused.")
    assert len(provider.requests) == 2


async def test_no_answer_in_time_means_no(bus: MemoryBus, store: SqlStore) -> None:
    ran, provider, _, result = await answered_turn(bus, store, None, wait=0.05)

    assert ran == []
    assert result.startswith("The user refused.")
    assert len(provider.requests) == 2


async def test_a_yes_with_no_question_waiting_is_an_ordinary_message(
    bus: MemoryBus, store: SqlStore
) -> None:
    worker, provider = make_worker(bus, store, [text_reply("Yes to what?")], [], PATIENCE)
    outbox = Outbox(bus)
    async with running(worker):
        await hand_in(worker, said("yes"))
        await outbox.until("Yes to what?", "reply")

    assert provider.requests[0].messages[-1].text == "yes"
