"""What follows a tool round, through a real turn of the worker: a profile folder sets
`verify_after_tools` and names an `after_tool` hook that ends the turn when `finish` ran; the
(fake) OpenAI API asks for the tools. Ending: the person gets the hook's answer after one model
call, and the message is settled (processed, checkpoint completed) as for any answer.
Verification: the second request ends with the check, which is stored nowhere. The profile is
read from disk and the provider and runtime built the way `bots/app.py` builds them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bots.profiles import load_profile
from bots.providers import build_provider
from bots.settings import Settings
from core.backends.sql.store import SqlStore
from core.bus import EVENTS
from core.envelopes import Address, EventEnvelope, Inbound, Outbound
from core.policy import ChannelPolicy
from core.runtime import AgentRuntime
from core.tool_rounds import verification
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes import FakeOpenAI, Text, ToolUse
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
CRITERIA = "the file reached the person"
PROFILE = f"""
provider = "openai"
model = "gpt-4o-mini"
verify_after_tools = true
verify_criteria = "{CRITERIA}"

[modes]
telegram = "full"

[hooks]
after_tool = ["tests.hook_modules.policy:end_with_answer"]
"""


class Say(BaseModel):
    """The tools' arguments."""

    text: str


@pytest.fixture
async def bot(
    fake_openai: FakeOpenAI, store: SqlStore, tmp_path: Path
) -> AsyncIterator[tuple[Worker, MemoryBus]]:
    folder = tmp_path / "profiles" / "finishing"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "profiles", "finishing")
    options = profile.settings
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )

    async def say(args: Say, _ctx: ToolContext) -> str:
        return f"sent {args.text}"

    provider, resolved = build_provider(settings, profile)
    runtime = AgentRuntime(
        provider=provider,
        model=resolved.model,
        tools=ToolRegistry(
            Tool(name=name, description=name, args=Say, tier=SafetyTier.READ_ONLY, run=say)
            for name in ("finish", "echo")
        ),
        store=store,
        tool_hooks=options.hooks.tool_hooks(),
        verify=verification(options.verify_criteria) if options.verify_after_tools else None,
    )
    bus = MemoryBus()
    worker = build_worker(
        bus=bus, store=store, runtime=runtime, policy=ChannelPolicy(modes=options.modes)
    )
    task = asyncio.create_task(worker.run())
    try:
        yield worker, bus
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()


async def settled_turn(worker: Worker, bus: MemoryBus, inbound: Inbound) -> list[Outbound]:
    """Hand `inbound` in; what was sent for it, once its turn is settled."""
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    try:
        await hand_in(worker, inbound)
        sent = await Outbox(bus, "telegram").turn_of(inbound)
        while True:
            envelope = await asyncio.wait_for(anext(events), PATIENCE)
            assert isinstance(envelope, EventEnvelope)
            if envelope.name == "turn.settled":
                return sent
    finally:
        await subscription.aclose()


async def test_a_hook_ends_the_turn_after_one_model_call_and_it_settles(
    bot: tuple[Worker, MemoryBus], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, bus = bot
    fake_openai.script(ToolUse([("call_1", "finish", {"text": "report.pdf"})]))
    inbound = Inbound(address=DM, user_id="u1", text="send the report", is_direct=True)

    sent = await settled_turn(worker, bus, inbound)

    assert len(fake_openai.requests) == 1
    assert sent[-1].text.startswith("All done: sent report.pdf. key ")
    assert "sk-proj-" not in sent[-1].text
    assert await store.is_processed(inbound.dedupe_key)
    checkpoint = await store.get_checkpoint(inbound.dedupe_key)
    assert checkpoint is not None
    assert (checkpoint.status, checkpoint.tool_rounds) == ("completed", 1)
    session = await store.current_session(inbound.session_key)
    stored = await store.list_messages(session.id)
    assert [(m.role, m.text) for m in stored][-2:] == [
        ("tool", "sent report.pdf"),
        ("assistant", sent[-1].text),
    ]


async def test_the_request_after_a_tool_round_carries_the_check_and_nothing_stores_it(
    bot: tuple[Worker, MemoryBus], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, bus = bot
    fake_openai.script(ToolUse([("call_1", "echo", {"text": "hi"})]), Text("Echoed."))
    inbound = Inbound(address=DM, user_id="u1", text="echo hi", is_direct=True)

    sent = await settled_turn(worker, bus, inbound)

    assert sent[-1].text == "Echoed."
    assert len(fake_openai.requests) == 2
    first: list[dict[str, Any]] = fake_openai.requests[0].json["messages"]
    second: list[dict[str, Any]] = fake_openai.requests[1].json["messages"]
    check = verification(CRITERIA)
    assert check not in str(first)
    assert second[-2]["role"] == "tool"
    assert second[-1] == {"role": "user", "content": check}
    session = await store.current_session(inbound.session_key)
    stored = await store.list_messages(session.id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert all(check not in m.text for m in stored)
