"""The operator's tool hooks through a real turn: a profile folder names a `before_tool` hook
by import path, the (fake) OpenAI API asks for the tool, the hook blocks it, and the model's
next call reads the hook's reason as the tool's result; the lifecycle event says who blocked it.
The profile is read from disk and the provider built the way `bots/app.py` does."""

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
from core.envelopes import Address, EventEnvelope, Inbound
from core.errors import ConfigError
from core.policy import ChannelPolicy
from core.runtime import AgentRuntime
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes import FakeOpenAI, Text, ToolUse
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
HOOK = "tests.hook_modules.policy:deny_echo"
PROFILE = f"""
provider = "openai"
model = "gpt-4o-mini"

[modes]
telegram = "full"

[hooks]
before_tool = ["{HOOK}"]
"""


class Say(BaseModel):
    """The echo tool's arguments."""

    text: str


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
async def bot(
    fake_openai: FakeOpenAI, store: SqlStore, tmp_path: Path, ran: list[str]
) -> AsyncIterator[tuple[Worker, MemoryBus]]:
    folder = tmp_path / "profiles" / "hooked"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "profiles", "hooked")
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )

    async def echo(args: Say, _ctx: ToolContext) -> str:
        ran.append(args.text)
        return args.text

    provider, resolved = build_provider(settings, profile)
    runtime = AgentRuntime(
        provider=provider,
        model=resolved.model,
        tools=ToolRegistry(
            [Tool(name="echo", description="Echo.", args=Say, tier=SafetyTier.READ_ONLY, run=echo)]
        ),
        store=store,
        tool_hooks=profile.settings.hooks.tool_hooks(),
    )
    bus = MemoryBus()
    worker = build_worker(
        bus=bus, store=store, runtime=runtime, policy=ChannelPolicy(modes=profile.settings.modes)
    )
    task = asyncio.create_task(worker.run())
    try:
        yield worker, bus
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()


async def test_a_hook_blocks_the_tool_and_the_model_reads_its_reason(
    bot: tuple[Worker, MemoryBus], fake_openai: FakeOpenAI, ran: list[str]
) -> None:
    worker, bus = bot
    fake_openai.script(ToolUse([("call_1", "echo", {"text": "hi"})]), Text("It is switched off."))
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    inbound = Inbound(address=DM, user_id="u1", text="echo hi", is_direct=True)
    seen: list[EventEnvelope] = []
    try:
        await hand_in(worker, inbound)
        sent = await Outbox(bus, "telegram").turn_of(inbound)
        while not seen or seen[-1].name != "agent.run.complete":
            envelope = await asyncio.wait_for(anext(events), PATIENCE)
            assert isinstance(envelope, EventEnvelope)
            seen.append(envelope)
    finally:
        await subscription.aclose()

    assert sent[-1].text == "It is switched off."
    assert ran == []
    second: list[dict[str, Any]] = fake_openai.requests[1].json["messages"]
    [result] = [m for m in second if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_1"
    assert result["content"] == "echo is switched off here by the operator."
    [finished] = [e for e in seen if e.name == "tool.result"]
    assert finished.data["blocked_by"] == HOOK
    assert finished.data["is_error"] is True


def test_a_profile_naming_a_hook_that_does_not_import_stops_the_load(tmp_path: Path) -> None:
    folder = tmp_path / "profiles" / "bad"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(
        '[hooks]\nafter_tool = "tests.hook_modules.policy:nothing_here"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        load_profile(tmp_path / "profiles", "bad")
    assert str(caught.value) == (
        f"{folder / 'profile.toml'}: [hooks] after_tool: "
        "'tests.hook_modules.policy:nothing_here': tests.hook_modules.policy has no nothing_here"
    )
