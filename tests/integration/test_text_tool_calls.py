"""A tool call the model writes out as text, through a real turn: the (fake) OpenAI API
answers with `<tool_call>{...}</tool_call>` in its text and no native call, the runtime runs
the tool and the model's next request carries the call and its result; the person never sees
the written call, in the stream, the stored answer or the final message. Off, or for a tool
the turn does not offer, the text stays as written and nothing runs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.events import AgentEvent, RunCompleted, TextDelta, ToolFinished
from core.messages import Message
from core.modes import FULL, NO_TOOLS, CapabilityMode
from core.providers.openai import OpenAIProvider
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from tests.fakes import FakeOpenAI, Text
from tests.integration.helpers import GPT

WRITTEN = (
    'Let me check.\n<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
)
KEY = "telegram:b:42"


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
