"""Tool calls written out as text: the shapes picked up, what is left as written, and a
written call of a privileged tool asking for the confirmation a native one does."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.events import RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import FULL
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.text_tool_calls import TextToolCalls, pick_up
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry

OFFERED = ("get_weather", "echo")


def test_a_tool_call_tag_is_picked_up_and_taken_out_of_the_text() -> None:
    text, calls = pick_up(
        'Let me look.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
        "</tool_call>",
        OFFERED,
    )
    assert text == "Let me look.\n"
    [call] = calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Oslo"})
    assert call.id.startswith("text_")


@pytest.mark.parametrize("fence", ["```json", "```tool_call", "```", "```JSON"])
def test_a_fenced_block_with_a_call_is_picked_up(fence: str) -> None:
    text, calls = pick_up(
        f'{fence}\n{{"name": "echo", "arguments": {{"text": "hi"}}}}\n```\nDone.', OFFERED
    )
    assert text == "\nDone."
    assert [(c.name, c.arguments) for c in calls] == [("echo", {"text": "hi"})]


def test_an_answer_that_is_only_the_json_object_is_a_call() -> None:
    text, calls = pick_up('  {"name": "echo", "parameters": {"text": "hi"}}\n', OFFERED)
    assert text == ""
    assert [(c.name, c.arguments) for c in calls] == [("echo", {"text": "hi"})]


def test_arguments_as_a_json_string_and_the_openai_shape_are_read() -> None:
    _, calls = pick_up(
        '<tool_call>{"type": "function", "function": {"name": "echo", '
        '"arguments": "{\\"text\\": \\"hi\\"}"}}</tool_call>',
        OFFERED,
    )
    assert [(c.name, c.arguments) for c in calls] == [("echo", {"text": "hi"})]


def test_several_calls_in_several_blocks_and_in_a_list() -> None:
    text, calls = pick_up(
        '<tool_call>{"name": "echo", "arguments": {"text": "a"}}</tool_call>\n'
        '<tool_call>[{"name": "echo", "arguments": {"text": "b"}}, '
        '{"name": "get_weather", "arguments": {"city": "Rome"}}]</tool_call>',
        OFFERED,
    )
    assert text == "\n"
    assert [(c.name, c.arguments) for c in calls] == [
        ("echo", {"text": "a"}),
        ("echo", {"text": "b"}),
        ("get_weather", {"city": "Rome"}),
    ]
    assert len({c.id for c in calls}) == 3


@pytest.mark.parametrize(
    "answer",
    [
        '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
        '<tool_call>[{"name": "echo", "arguments": {}}, {"name": "rm_rf"}]</tool_call>',
        '<tool_call>{"name": "echo", "arguments": {"text": </tool_call>',
        '```json\n{"name": "echo", "arguments": [1]}\n```',
        '```python\n{"name": "echo", "arguments": {}}\n```',
        '{"name": "echo", "arguments": {}} is what I would send.',
        'Here is JSON: {"name": "echo", "arguments": {}}',
        "<tool_call>not json</tool_call> and ``` a stray fence",
        "```json\n[]\n```",
    ],
)
def test_unknown_names_bad_json_and_other_blocks_stay_as_written(answer: str) -> None:
    assert pick_up(answer, OFFERED) == (answer, [])


def test_nothing_is_picked_up_when_no_tool_is_offered() -> None:
    answer = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'
    assert pick_up(answer, ()) == (answer, [])


def test_an_unclosed_tag_at_the_end_is_forgiven() -> None:
    text, calls = pick_up('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}\n', OFFERED)
    assert text == ""
    assert [c.name for c in calls] == ["echo"]


def test_streamed_in_pieces_the_call_is_never_shown() -> None:
    answer = (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
        "</tool_call>\nOne moment."
    )
    for size in (1, 2, 3, 7, 40):
        reader = TextToolCalls(OFFERED)
        pieces = [reader.add(answer[i : i + size]) for i in range(0, len(answer), size)]
        pieces.append(reader.end())
        assert "".join(pieces) == "Checking.\n\nOne moment."
        assert all("<" not in piece and "{" not in piece for piece in pieces)
        assert [c.name for c in reader.calls] == ["get_weather"]
        assert reader.raw == answer


def test_streamed_text_outside_blocks_is_shown_as_it_comes() -> None:
    reader = TextToolCalls(OFFERED)
    assert reader.add("Hello the") == "Hello the"
    assert reader.add("re <tool") == "re "
    assert reader.add("box> is a tag") == "<toolbox> is a tag"
    assert reader.end() == ""
    assert reader.calls == []


class Target(BaseModel):
    """The wipe tool's arguments."""

    path: str


async def test_a_written_privileged_call_is_confirmed_like_a_native_one(store: SqlStore) -> None:
    ran: list[str] = []
    asked: list[ToolCall] = []

    async def wipe(args: Target, _ctx: ToolContext) -> str:
        ran.append(args.path)
        return "wiped"

    async def refuse(call: ToolCall, _ctx: ToolContext) -> bool:
        asked.append(call)
        return False

    written = '<tool_call>{"name": "wipe", "arguments": {"path": "/tmp/x"}}</tool_call>'
    provider = ScriptedProvider([text_reply(written), text_reply("Not wiped.")])
    tool = Tool(name="wipe", description="Wipe.", args=Target, tier=SafetyTier.PRIVILEGED, run=wipe)
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry([tool]),
        store=store,
        confirm=refuse,
        limits=RuntimeLimits(text_tool_calls=True),
    )
    session = await store.current_session("terminal:default:it")
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    events = [e async for e in runtime.run(session.id, Message.user("wipe it"), context)]

    assert [(c.name, c.arguments) for c in asked] == [("wipe", {"path": "/tmp/x"})]
    assert ran == []
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error
    assert finished.output == "The user refused. Tool 'wipe' did not run."
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "Not wiped."
