"""A tool call the model writes out as text, through a real turn: the (fake) OpenAI API
answers with `<tool_call>{...}</tool_call>` in its text and no native call, the runtime runs
the tool and the model's next request carries the call and its result; the person never sees
the written call, in the stream, the stored answer or the final message. Off, or for a tool
the turn does not offer, the text stays as written and nothing runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings
from core.backends.sql.store import SqlStore
from core.bus import Bus, outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.events import AgentEvent, RunCompleted, TextDelta, ToolFinished
from core.messages import Message
from core.modes import FULL, NO_TOOLS, CapabilityMode
from core.providers.openai import OpenAIProvider
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from tests.fakes import FakeAnthropic, FakeOpenAI, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.helpers import GPT
from tests.profile_env import profile_env
from tests.workers import hand_in

WRITTEN = (
    'Let me check.\n<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
)
KEY = "telegram:b:42"
DM = Address(platform="telegram", bot="b", chat="42")
PATIENCE = 10.0


class City(BaseModel):
    """The weather tool's arguments."""

    city: str


def _runtime(gpt: OpenAIProvider, store: SqlStore, ran: list[str], *, on: bool) -> AgentRuntime:
    async def weather(args: City, _ctx: ToolContext) -> str:
        ran.append(args.city)
        return f"Sunny in {args.city}."

    tool = Tool(
        name="weather", description="Weather.", args=City, tier=SafetyTier.READ_ONLY, run=weather
    )
    return AgentRuntime(
        provider=gpt,
        model=GPT,
        tools=ToolRegistry([tool]),
        store=store,
        limits=RuntimeLimits(text_tool_calls=on),
    )


async def _turn(runtime: AgentRuntime, store: SqlStore, mode: CapabilityMode) -> list[AgentEvent]:
    session = await store.current_session(KEY)
    context = ChannelContext(platform="telegram", mode=mode, session_key=KEY)
    return [e async for e in runtime.run(session.id, Message.user("Weather in Oslo?"), context)]


async def test_a_call_written_as_text_runs_and_its_result_goes_back(
    gpt: OpenAIProvider, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    ran: list[str] = []
    fake_openai.script(Text(WRITTEN, chunk=5), Text("It is sunny in Oslo."))

    events = await _turn(_runtime(gpt, store, ran, on=True), store, FULL)

    assert ran == ["Oslo"]
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert (finished.name, finished.output, finished.is_error) == (
        "weather",
        "Sunny in Oslo.",
        False,
    )
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "Let me check.\nIt is sunny in Oslo."
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "It is sunny in Oslo."
    second: list[dict[str, Any]] = fake_openai.requests[1].json["messages"]
    [asked] = [m for m in second if m["role"] == "assistant"]
    assert asked["content"] == "Let me check."
    [call] = asked["tool_calls"]
    assert call["function"]["name"] == "weather"
    [result] = [m for m in second if m["role"] == "tool"]
    assert (result["tool_call_id"], result["content"]) == (call["id"], "Sunny in Oslo.")
    session = await store.current_session(KEY)
    stored = await store.list_messages(session.id)
    assert "<tool_call>" not in "".join(m.text for m in stored)
    assert [c.name for m in stored for c in m.tool_calls] == ["weather"]


async def test_off_the_written_call_is_only_text(
    gpt: OpenAIProvider, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    ran: list[str] = []
    fake_openai.script(Text(WRITTEN))

    events = await _turn(_runtime(gpt, store, ran, on=False), store, FULL)

    assert ran == []
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == WRITTEN
    assert len(fake_openai.requests) == 1


async def test_a_written_call_of_a_tool_not_offered_is_only_text(
    gpt: OpenAIProvider, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    ran: list[str] = []
    fake_openai.script(Text(WRITTEN))

    events = await _turn(_runtime(gpt, store, ran, on=True), store, NO_TOOLS)

    assert ran == []
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == WRITTEN
    assert len(fake_openai.requests) == 1


async def test_the_profile_setting_reaches_the_turns_of_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    """`text_tool_calls = true` in profile.toml, through the wiring of `bots/app.py`."""
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        'text_tool_calls = true\n[access.telegram]\ndm_policy = "open"\n',
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        SWITCHBOARD_MODEL="claude-haiku-4-5",
    )
    fake_anthropic.script(
        Text('<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'),
        Text("It is 42."),
    )
    settings = load_settings()
    inbound = Inbound(address=DM, user_id="A", text="6*7?", is_direct=True)

    async with embedded(settings, load_profile(settings.profiles_dir, settings.profile)) as parts:
        task = asyncio.create_task(parts.worker.run())
        try:
            await hand_in(parts.worker, inbound)
            final = await _final(parts.bus, inbound)
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)

    assert final.text == "It is 42."
    second: list[dict[str, Any]] = fake_anthropic.requests[1].json["messages"]
    results = [
        block
        for message in second
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert [str(r["content"]) for r in results] == ["6*7 = 42"]


async def _final(bus: Bus, inbound: Inbound) -> Outbound:
    """The answer to `inbound` delivered on the telegram queue."""
    while True:
        delivery = await bus.receive(outbound_queue("telegram"), consumer="t", timeout=PATIENCE)
        assert delivery is not None, "no answer"
        await delivery.ack()
        out = delivery.envelope
        assert isinstance(out, Outbound)
        if out.kind == "reply" and out.reply_to == inbound.id:
            return out
