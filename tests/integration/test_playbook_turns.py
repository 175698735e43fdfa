"""The playbook and the attention pass through real turns: `AgentRuntime` on an SQLite store,
the Anthropic provider against its fake. A turn whose tool call worked is offered to the next
similar request in its system prompt; a turn whose tool failed is not; the attention layer goes
with each person's message."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from core.attention import ATTENTION_HEADING, AttentionSettings
from core.backends.sql.store import SqlStore
from core.events import AgentEvent, RunCompleted
from core.messages import Message
from core.modes import FULL
from core.playbook import PLAYBOOK_HEADING, Playbook, digest
from core.providers.anthropic import AnthropicProvider
from core.runtime import AgentRuntime, ChannelContext
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from tests.fakes import FakeAnthropic, Text, ToolUse
from tests.integration.helpers import SONNET


class City(BaseModel):
    """A city's name."""

    city: str


async def _weather(args: City, _ctx: ToolContext) -> str:
    return f"Sunny in {args.city}"


async def _broken(args: City, _ctx: ToolContext) -> str:
    raise RuntimeError("the translation service is down")


def _runtime(provider: AnthropicProvider, store: SqlStore) -> AgentRuntime:
    tools = ToolRegistry(
        [
            Tool(
                name="weather",
                description="Weather.",
                args=City,
                tier=SafetyTier.READ_ONLY,
                run=_weather,
            ),
            Tool(
                name="translate",
                description="Translate.",
                args=City,
                tier=SafetyTier.READ_ONLY,
                run=_broken,
            ),
        ]
    )
    return AgentRuntime(
        provider=provider,
        model=SONNET,
        tools=tools,
        store=store,
        playbook=Playbook(store, "bot"),
        attention=AttentionSettings(),
    )


async def _turn(runtime: AgentRuntime, store: SqlStore, chat: str, text: str) -> AgentEvent:
    key = f"terminal:default:{chat}"
    session = await store.current_session(key)
    context = ChannelContext(platform="terminal", mode=FULL, session_key=key, user_id="u1")
    events = [e async for e in runtime.run(session.id, Message.user(text), context)]
    return events[-1]


def _system(fake: FakeAnthropic, index: int) -> str:
    blocks: list[dict[str, Any]] = fake.requests[index].json["system"]
    return "\n".join(block["text"] for block in blocks)


async def test_a_tool_sequence_that_worked_is_a_hint_for_a_similar_request(
    claude: AnthropicProvider, fake_anthropic: FakeAnthropic, store: SqlStore
) -> None:
    runtime = _runtime(claude, store)
    fake_anthropic.script(
        ToolUse([("call_1", "weather", {"city": "Paris"})]),
        Text("It is sunny in Paris."),
        Text("Lyon is sunny too."),
    )

    first = await _turn(runtime, store, "one", "What is the weather in Paris?")
    second = await _turn(runtime, store, "two", "And the weather in Lyon, urgently!")

    assert isinstance(first, RunCompleted)
    assert isinstance(second, RunCompleted)
    assert PLAYBOOK_HEADING not in _system(fake_anthropic, 0)
    hinted = _system(fake_anthropic, 2)
    assert f"{PLAYBOOK_HEADING}\n" in hinted
    assert "- weather (worked once)" in hinted
    assert ATTENTION_HEADING in hinted
    assert "- urgent:" in hinted
    assert "- topic: weather, lyon" in hinted


async def test_a_turn_whose_tool_failed_is_no_hint(
    claude: AnthropicProvider, fake_anthropic: FakeAnthropic, store: SqlStore
) -> None:
    runtime = _runtime(claude, store)
    fake_anthropic.script(
        ToolUse([("call_1", "translate", {"city": "Bonjour"})]),
        Text("Sorry, I could not translate it."),
        Text("Still cannot."),
    )

    first = await _turn(runtime, store, "one", "Translate bonjour into English")
    await _turn(runtime, store, "two", "Translate merci into English")

    assert isinstance(first, RunCompleted)
    assert PLAYBOOK_HEADING not in _system(fake_anthropic, 2)
    assert await store.find_sequences("bot", [digest("translate")], limit=3) == []


async def test_the_focus_carries_across_the_turns_of_a_session(
    claude: AnthropicProvider, fake_anthropic: FakeAnthropic, store: SqlStore
) -> None:
    runtime = _runtime(claude, store)
    fake_anthropic.script(Text("Trains leave hourly."), Text("The last one is at 23:00."))

    await _turn(runtime, store, "one", "Train times from Paris to Lyon?")
    await _turn(runtime, store, "one", "When is the last train to Lyon")

    assert "- focus:" not in _system(fake_anthropic, 0)
    assert "- focus: train, lyon (the person's last 2 messages)" in _system(fake_anthropic, 1)
