"""The `read_skill` tool: a skill's body by name, and its place in the capability modes."""

from __future__ import annotations

import pytest

from core.backends.sql.store import SqlStore
from core.errors import ToolError
from core.events import ModelEvent, RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT, SAFE_CHAT_TOOLS
from core.profile import Profile
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.skills import Skill
from core.tools import SafetyTier, ToolContext, ToolRegistry, builtin_tools, read_skill_tool

SKILLS = [
    Skill(name="summarize", description="Summaries.", body="Lead with the point."),
    Skill(name="translate", description="Translations.", body="Keep the tone."),
]

CONTEXT = ToolContext(session_id="s1")


async def test_returns_the_body_of_the_named_skill() -> None:
    tool = read_skill_tool(SKILLS)
    assert await tool({"name": "translate"}, CONTEXT) == "Keep the tone."
    assert await tool({"name": " summarize "}, CONTEXT) == "Lead with the point."


async def test_the_name_is_matched_without_case_when_unambiguous() -> None:
    assert await read_skill_tool(SKILLS)({"name": "Summarize"}, CONTEXT) == "Lead with the point."


async def test_an_unknown_name_lists_the_skills() -> None:
    with pytest.raises(ToolError) as caught:
        await read_skill_tool(SKILLS)({"name": "poetry"}, CONTEXT)
    assert str(caught.value) == "Unknown skill 'poetry'. Available skills: summarize, translate."


async def test_without_skills_every_call_says_there_are_none() -> None:
    with pytest.raises(ToolError, match=r"Available skills: none \(this bot has no skills\)"):
        await read_skill_tool([])({"name": "summarize"}, CONTEXT)


async def test_missing_or_empty_name_is_a_correctable_error() -> None:
    tool = read_skill_tool(SKILLS)
    with pytest.raises(ToolError, match="Invalid arguments for read_skill: name"):
        await tool({}, CONTEXT)
    with pytest.raises(ToolError, match="Invalid arguments for read_skill: name"):
        await tool({"name": ""}, CONTEXT)


def test_is_read_only_and_describes_its_argument() -> None:
    tool = read_skill_tool(SKILLS)
    assert tool.name == "read_skill"
    assert tool.tier is SafetyTier.READ_ONLY
    assert tool.spec.parameters["required"] == ["name"]
    assert tool.spec.parameters["properties"]["name"]["type"] == "string"


def test_offered_by_every_mode_with_tools() -> None:
    registry = ToolRegistry([*builtin_tools(), read_skill_tool(SKILLS)])
    assert "read_skill" in SAFE_CHAT_TOOLS
    for mode in (FULL, SAFE_CHAT, DISCORD):
        assert "read_skill" in [t.name for t in mode.allowed_tools(registry)]
    assert NO_TOOLS.allowed_tools(registry) == []


async def test_a_safe_chat_turn_reads_a_skill_listed_in_its_prompt(store: SqlStore) -> None:
    profile = Profile(name="p", skills=SKILLS)
    seen: list[ModelRequest] = []

    def first(request: ModelRequest) -> list[ModelEvent]:
        seen.append(request)
        return tool_reply(ToolCall(id="c1", name="read_skill", arguments={"name": "summarize"}))

    provider = ScriptedProvider([first, text_reply("Here is the gist.")])
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry([*builtin_tools(), read_skill_tool(profile.skills)]),
        store=store,
        prompt=profile.system_prompt(),
    )
    session = await store.current_session("telegram:b:c")
    context = ChannelContext(platform="telegram", mode=SAFE_CHAT, session_key="telegram:b:c")
    events = [e async for e in runtime.run(session.id, Message.user("tl;dr this"), context)]

    assert "- summarize — Summaries." in seen[0].system
    assert "read_skill" in [spec.name for spec in seen[0].tools]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.name, e.output, e.is_error) for e in finished] == [
        ("read_skill", "Lead with the point.", False)
    ]
    assert isinstance(events[-1], RunCompleted)
    # The second call sends the same system prompt: the provider's cache keeps hitting.
    assert provider.requests[1].system == provider.requests[0].system
