"""A sub-agent's events on the lifecycle topic, through the real worker: nested under the
person's turn (`parent_run_id`, `depth`), while the chat gets only the parent's answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.bus import EVENTS
from core.envelopes import Address, EventEnvelope, Inbound
from core.messages import ToolCall
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.runtime import AgentRuntime
from core.subagents import DELEGATE, Subagents
from core.tools import ToolRegistry
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
TERMINAL = Address(platform="terminal", chat="alice")


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_childs_events_are_published_under_its_parents_run(
    bus: MemoryBus, store: SqlStore
) -> None:
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="d1", name=DELEGATE, arguments={"task": "say hi"})),
        text_reply("hi from the child"),
        text_reply("The child said hi."),
    ]
    runtime = AgentRuntime(
        provider=ScriptedProvider(script), model="test-model", tools=ToolRegistry(), store=store
    )
    runtime.tools.add(Subagents(runtime).tool())
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(modes={"terminal": "full"}),
        prompt_hints={"terminal": "Plain text only."},
    )
    inbound = Inbound(address=TERMINAL, user_id="u1", text="delegate please", is_direct=True)
    outbox = Outbox(bus)
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    seen: list[EventEnvelope] = []
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, inbound)
        replies = await outbox.turn_of(inbound)
        while not seen or seen[-1].name != "turn.settled":
            envelope = await asyncio.wait_for(anext(events), PATIENCE)
            assert isinstance(envelope, EventEnvelope)
            seen.append(envelope)
    finally:
        await subscription.aclose()
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    parent_run = seen[0].run_id
    names = [(e.name, e.run_id == parent_run, e.data.get("depth")) for e in seen]
    assert names == [
        ("agent.run.start", True, None),
        ("tool.request", True, None),
        ("agent.run.start", False, 1),
        ("agent.run.complete", False, 1),
        ("tool.result", True, None),
        ("checkpoint.saved", True, None),
        ("agent.run.complete", True, None),
        ("turn.settled", True, None),
    ]
    child = [e for e in seen if e.data.get("depth") == 1]
    assert {e.data["parent_run_id"] for e in child} == {parent_run}
    session = await store.current_session(TERMINAL.session_key)
    assert {e.session_id for e in child} == {f"{session.id}/sub/d1"}
    assert {e.session_key for e in seen} == {TERMINAL.session_key}
    # The chat reads the parent's answer; the child's text never streams there.
    assert replies[-1].text == "The child said hi."
    assert all("hi from the child" not in r.text for r in replies)
