"""`Lifecycle` publishes a turn's events without the turn waiting, in order, all of them."""

from __future__ import annotations

import asyncio

from core.bus.names import EVENTS
from core.envelopes import EventEnvelope
from core.events import Joined, RunCompleted, RunStarted, ToolRequested
from core.modes import ModeCatalog
from core.redact import Redactor
from core.runtime import ChannelContext
from core.turns.lifecycle import Lifecycle
from tests.backends.memory_bus import MemoryBus


async def test_events_queued_while_one_is_sent_all_arrive_in_order() -> None:
    bus = MemoryBus()
    events = await bus.subscribe(EVENTS)
    lifecycle = Lifecycle(bus, Redactor(secrets=["s3cret-token"]))
    context = ChannelContext(
        platform="telegram", mode=ModeCatalog().get("safe-chat"), session_key="telegram:b:1"
    )
    turns = 30
    for n in range(turns):
        run = f"run-{n}"
        await lifecycle.publish(
            RunStarted(run_id=run, session_id="s", provider="p", model="m"), "s", run, context
        )
        await lifecycle.publish(
            ToolRequested(call_id="c", name="calc", arguments={"key": "s3cret-token"}),
            "s",
            run,
            context,
        )
        await lifecycle.publish(RunCompleted(run_id=run, text="done"), "s", run, context)

    await lifecycle.sent()
    got: list[EventEnvelope] = []
    async with asyncio.timeout(5):
        async for envelope in events:
            assert isinstance(envelope, EventEnvelope)
            got.append(envelope)
            if len(got) == 3 * turns:
                break

    assert [(e.run_id, e.name) for e in got] == [
        (f"run-{n}", name)
        for n in range(turns)
        for name in ("agent.run.start", "tool.request", "agent.run.complete")
    ]
    assert all("s3cret-token" not in str(e.data) for e in got)
    assert all("duration_ms" in e.data for e in got if e.name == "agent.run.complete")
    await events.aclose()
    await bus.close()


async def test_a_joined_message_is_published_scrubbed_as_agent_run_joined() -> None:
    bus = MemoryBus()
    events = await bus.subscribe(EVENTS)
    lifecycle = Lifecycle(bus, Redactor(secrets=["s3cret-token"]))
    context = ChannelContext(
        platform="telegram", mode=ModeCatalog().get("safe-chat"), session_key="telegram:b:1"
    )
    joined = Joined(inbound_id="in-2", text="also use s3cret-token")
    await lifecycle.publish(joined, "s", "run-1", context)
    await lifecycle.sent()
    async with asyncio.timeout(5):
        envelope = await anext(aiter(events))
    assert isinstance(envelope, EventEnvelope)
    assert (envelope.name, envelope.run_id, envelope.session_key) == (
        "agent.run.joined",
        "run-1",
        "telegram:b:1",
    )
    assert envelope.data["inbound_id"] == "in-2"
    assert "s3cret-token" not in envelope.data["text"]
    assert envelope.data["text"].startswith("also use ")
    await events.aclose()
    await bus.close()
