"""Checkpoints of user turns, and what a starting worker does with those a crash left behind.

Runs against the real `MemoryBus`, `SqlStore` and `AgentRuntime`, with a scripted provider.
A crash is simulated by writing exactly what a process killed mid-tool-round leaves in the
store: the user message, the assistant's tool call without a result, a `running` checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from core.backends.sql.store import SqlStore
from core.checkpoints import ABANDONED_TEXT, Checkpoint
from core.events import ModelEvent
from core.messages import Message, ToolCall
from core.providers import ModelRequest
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.tools import builtin_tools
from tests.backends.memory_bus import MemoryBus
from tests.unit.test_worker import PATIENCE, command, make_worker, message, running
from tests.workers import Outbox, hand_in

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


def calc(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="calculator", arguments={"expression": "6*7"})


async def processed(store: SqlStore, key: str) -> None:
    """Returns once `key` is marked processed."""
    while True:
        if await store.is_processed(key):
            return
        await asyncio.sleep(0.01)


async def crashed_mid_tool_round(store: SqlStore, text: str = "6*7?") -> Checkpoint:
    """The store as a process killed while its tool ran leaves it."""
    inbound = message(text, platform_message_id="m-1")
    session = await store.current_session(inbound.session_key)
    await store.append_message(session.id, Message.user(text, source=inbound.dedupe_key))
    await store.append_message(session.id, Message.assistant("", [calc("c1")]))
    checkpoint = Checkpoint(
        run_key=inbound.dedupe_key,
        session_id=session.id,
        inbound=inbound,
        started_at=START,
        updated_at=START,
    )
    await store.save_checkpoint(checkpoint)
    return checkpoint


async def test_a_turn_is_running_while_it_runs_then_completed_with_its_tool_rounds(
    bus: MemoryBus, store: SqlStore
) -> None:
    inbound = message("6*7 twice?", platform_message_id="m-1")
    seen_while_running: list[Checkpoint | None] = []

    async def first(request: ModelRequest) -> list[ModelEvent]:
        seen_while_running.append(await store.get_checkpoint(inbound.dedupe_key))
        return tool_reply(calc("c1"))

    script: list[ScriptStep] = [first, tool_reply(calc("c2")), text_reply("42, twice")]
    worker, _ = make_worker(bus, store, script, tools=builtin_tools())
    outbox = Outbox(bus)

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)

    assert sent[-1].text == "42, twice"
    [during] = seen_while_running
    assert during is not None
    assert (during.status, during.tool_rounds, during.inbound) == ("running", 0, inbound)
    done = await store.get_checkpoint(inbound.dedupe_key)
    assert done is not None
    assert (done.status, done.tool_rounds) == ("completed", 2)
    assert await store.incomplete_checkpoints() == []


async def test_a_command_is_not_checkpointed(bus: MemoryBus, store: SqlStore) -> None:
    worker, _ = make_worker(bus, store, [])
    outbox = Outbox(bus)
    help_ = command("help")
    async with running(worker):
        await hand_in(worker, help_)
        await outbox.turn_of(help_)

    assert await store.get_checkpoint(help_.dedupe_key) is None


async def test_a_worker_starting_after_a_crash_resumes_the_turn(
    bus: MemoryBus, store: SqlStore
) -> None:
    checkpoint = await crashed_mid_tool_round(store)
    worker, provider = make_worker(
        bus, store, [text_reply("It is 42.")], tools=builtin_tools(), on_crash="resume"
    )
    outbox = Outbox(bus)

    async with running(worker):
        sent = await outbox.turn_of(checkpoint.inbound)

    assert sent[-1].kind == "reply" and sent[-1].text == "It is 42."
    history = await store.list_messages(checkpoint.session_id)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert [m.text for m in history if m.role == "user"] == ["6*7?"]
    [request] = provider.requests
    assert [m.text for m in request.messages if m.role == "user"] == ["6*7?"]
    done = await store.get_checkpoint(checkpoint.run_key)
    assert done is not None and done.status == "completed"
    assert await store.is_processed(checkpoint.run_key)


async def test_a_worker_starting_after_a_crash_abandons_the_turn_and_says_so_once(
    bus: MemoryBus, store: SqlStore
) -> None:
    checkpoint = await crashed_mid_tool_round(store)
    worker, provider = make_worker(bus, store, [], on_crash="abandon")
    outbox = Outbox(bus)

    async with running(worker):
        sent = await outbox.turn_of(checkpoint.inbound)
        assert [(o.kind, o.text) for o in sent] == [("notice", ABANDONED_TEXT)]
        assert sent[0].address == checkpoint.inbound.address
        # Were it delivered again (another worker's mailbox), it is not taken up.
        await hand_in(worker, checkpoint.inbound)
        await asyncio.wait_for(processed(store, checkpoint.run_key), PATIENCE)

    again, _ = make_worker(bus, store, [], on_crash="abandon")
    async with running(again):
        await again.idle.wait()

    assert await outbox.is_empty()
    assert provider.requests == []
    found = await store.get_checkpoint(checkpoint.run_key)
    assert found is not None and found.status == "abandoned"
    assert await store.incomplete_checkpoints() == []


async def test_a_worker_without_a_crash_policy_leaves_checkpoints_alone(
    bus: MemoryBus, store: SqlStore
) -> None:
    checkpoint = await crashed_mid_tool_round(store)
    worker, _ = make_worker(bus, store, [])

    async with running(worker):
        await worker.idle.wait()

    assert await store.incomplete_checkpoints() == [checkpoint]
