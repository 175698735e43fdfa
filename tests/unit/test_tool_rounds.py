"""What follows a tool round (`core/tool_rounds.py`): a result that ends the turn without
another model call (a tool's `ToolResult`, an `after_tool` hook's `HookDecision.end`), and the
verification prompt added to the next request only.

Turns run on a scripted provider against the real SQLite store; the hooks are the modules of
`tests/hook_modules/`, named by import path as a profile names them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.errors import ConfigError, ToolError
from core.events import AgentEvent, RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import FULL
from core.profile import Profile
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tool_hooks import ToolHooks, ToolResultEvent, load_tool_hooks
from core.tool_rounds import VERIFY_PROMPT, verification
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry, ToolResult
from tests.hook_modules import policy

P = "tests.hook_modules.policy"
CONTEXT = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")


class Say(BaseModel):
    """Arguments of the test tools."""

    text: str


async def _finish(args: Say, _ctx: ToolContext) -> ToolResult:
    return ToolResult(text=f"sent {args.text}", end_turn=True, answer=f"{args.text} is on its way.")


async def _plain(args: Say, _ctx: ToolContext) -> str:
    return f"said {args.text}"


async def _fails(args: Say, _ctx: ToolContext) -> str:
    raise ToolError("could not")


def tools() -> ToolRegistry:
    def tool(name: str, run: Any, tier: SafetyTier = SafetyTier.READ_ONLY) -> Tool[Any]:
        return Tool(name=name, description=name, args=Say, tier=tier, run=run)

    return ToolRegistry(
        [
            tool("finish", _finish, SafetyTier.SIDE_EFFECTING),
            tool("plain", _plain),
            tool("fails", _fails),
            tool("file_ticket", _plain, SafetyTier.SIDE_EFFECTING),
        ]
    )


def call(call_id: str, name: str, text: str = "report.pdf") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"text": text})


async def turn(
    store: SqlStore,
    session_id: str,
    script: Iterable[ScriptStep],
    *,
    tool_hooks: ToolHooks | None = None,
    verify: str | None = None,
    text: str = "send it",
) -> tuple[list[AgentEvent], ScriptedProvider]:
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=tools(),
        store=store,
        tool_hooks=tool_hooks,
        verify=verify,
    )
    events = [e async for e in runtime.run(session_id, Message.user(text), CONTEXT)]
    return events, provider


def completed(events: list[AgentEvent]) -> RunCompleted:
    assert isinstance(events[-1], RunCompleted), events[-1]
    return events[-1]


# A result that ends the turn


async def test_a_tool_result_marked_end_turn_ends_it_without_another_model_call(
    store: SqlStore, session_id: str
) -> None:
    events, provider = await turn(store, session_id, [tool_reply(call("c1", "finish"))])

    assert len(provider.requests) == 1
    done = completed(events)
    assert (done.text, done.steps) == ("report.pdf is on its way.", 1)
    stored = await store.list_messages(session_id)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "send it"),
        ("assistant", ""),
        ("tool", "sent report.pdf"),
        ("assistant", "report.pdf is on its way."),
    ]
    assert stored[2].tool_call_id == "c1"

    # The next turn's request is well formed: the answer closes the round.
    _, later = await turn(store, session_id, [text_reply("You're welcome.")], text="thanks")
    assert [m.role for m in later.requests[0].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


async def test_a_round_ends_the_turn_only_when_every_call_ends_it(
    store: SqlStore, session_id: str
) -> None:
    script = [tool_reply(call("c1", "finish"), call("c2", "plain")), text_reply("Both done.")]
    events, provider = await turn(store, session_id, script)

    assert len(provider.requests) == 2
    assert completed(events).text == "Both done."
    assert [m.role for m in await store.list_messages(session_id)][-1] == "assistant"


async def test_every_call_of_a_round_ending_it_answers_with_each_answer(
    store: SqlStore, session_id: str
) -> None:
    script = [tool_reply(call("c1", "finish", "a.pdf"), call("c2", "finish", "b.pdf"))]
    events, provider = await turn(store, session_id, script)

    assert len(provider.requests) == 1
    assert completed(events).text == "a.pdf is on its way.\n\nb.pdf is on its way."


async def test_an_after_hook_ends_the_turn_with_its_answer_scrubbed(
    store: SqlStore, session_id: str
) -> None:
    hooks = load_tool_hooks(after_tool=f"{P}:end_with_answer")
    script = [tool_reply(call("c1", "plain")), text_reply("not asked")]
    events, provider = await turn(
        store, session_id, [tool_reply(call("c1", "finish"))], tool_hooks=hooks
    )

    assert len(provider.requests) == 1
    text = completed(events).text
    assert text.startswith("All done: sent report.pdf. key ")
    assert "sk-proj-abcdefghijklmnopqrstu012" not in text
    stored = await store.list_messages(session_id)
    assert stored[-1].text == text

    # The hook leaves other tools alone: the model is asked again.
    events, provider = await turn(store, session_id, script, tool_hooks=hooks)
    assert len(provider.requests) == 2
    assert completed(events).text == "not asked"


async def test_an_after_hook_ending_without_an_answer_answers_with_the_result(
    store: SqlStore, session_id: str
) -> None:
    hooks = load_tool_hooks(after_tool=f"{P}:end_with_result")
    events, provider = await turn(
        store, session_id, [tool_reply(call("c1", "plain"))], tool_hooks=hooks
    )

    assert len(provider.requests) == 1
    assert completed(events).text == "said report.pdf"
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.output == "said report.pdf"


async def test_a_later_hook_blocking_the_result_keeps_the_turn_going(
    store: SqlStore, session_id: str
) -> None:
    hooks = load_tool_hooks(after_tool=[f"{P}:end_with_result", f"{P}:withhold_result"])
    script = [tool_reply(call("c1", "plain")), text_reply("It was withheld.")]
    events, provider = await turn(store, session_id, script, tool_hooks=hooks)

    assert len(provider.requests) == 2
    assert completed(events).text == "It was withheld."


async def test_after_hooks_see_that_the_tool_ended_the_turn(
    store: SqlStore, session_id: str
) -> None:
    policy.SEEN.clear()
    hooks = load_tool_hooks(after_tool=f"{P}:record")
    events, provider = await turn(
        store, session_id, [tool_reply(call("c1", "finish"))], tool_hooks=hooks
    )

    assert len(provider.requests) == 1
    [seen] = policy.SEEN
    assert isinstance(seen, ToolResultEvent)
    assert (seen.result, seen.end_turn) == ("sent report.pdf", True)
    assert completed(events).text == "report.pdf is on its way."
    policy.SEEN.clear()


async def test_an_error_result_never_ends_the_turn(store: SqlStore, session_id: str) -> None:
    hooks = load_tool_hooks(after_tool=f"{P}:end_with_result")
    script = [tool_reply(call("c1", "fails")), text_reply("It failed, sorry.")]
    events, provider = await turn(store, session_id, script, tool_hooks=hooks)

    assert len(provider.requests) == 2
    assert completed(events).text == "It failed, sorry."


async def test_a_before_hook_cannot_end_the_turn(store: SqlStore, session_id: str) -> None:
    hooks = load_tool_hooks(before_tool=f"{P}:end_before")
    script = [tool_reply(call("c1", "plain")), text_reply("Said it.")]
    events, provider = await turn(store, session_id, script, tool_hooks=hooks)

    assert len(provider.requests) == 2
    assert completed(events).text == "Said it."


async def test_the_ticket_example_ends_the_turn_with_its_answer(
    store: SqlStore, session_id: str
) -> None:
    hooks = load_tool_hooks(after_tool="tests.hook_modules.examples:end_after_ticket")
    script = [tool_reply(call("c1", "file_ticket", "printer jam"))]
    events, provider = await turn(store, session_id, script, tool_hooks=hooks)

    assert len(provider.requests) == 1
    assert completed(events).text == "Filed: said printer jam. We will get back to you here."


# The verification prompt


async def test_the_request_after_a_tool_round_ends_with_the_verification_not_stored(
    store: SqlStore, session_id: str
) -> None:
    check = verification("the file reached the person")
    script = [tool_reply(call("c1", "plain")), text_reply("Done.")]
    events, provider = await turn(store, session_id, script, verify=check)

    assert completed(events).text == "Done."
    first, second = provider.requests
    assert check not in [m.text for m in first.messages]
    assert [(m.role, m.text) for m in second.messages[-2:]] == [
        ("tool", "said report.pdf"),
        ("user", check),
    ]
    assert check.startswith(VERIFY_PROMPT)
    assert check.endswith("The task is done when: the file reached the person")
    stored = await store.list_messages(session_id)
    assert check not in [m.text for m in stored]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]

    # A turn without tools is not checked.
    _, provider = await turn(store, session_id, [text_reply("Hi.")], verify=check, text="hi")
    assert provider.requests[0].messages[-1].text == "hi"


async def test_without_verify_the_request_after_a_tool_round_ends_with_the_results(
    store: SqlStore, session_id: str
) -> None:
    script = [tool_reply(call("c1", "plain")), text_reply("Done.")]
    _, provider = await turn(store, session_id, script)

    assert provider.requests[1].messages[-1].role == "tool"


def test_verification_without_criteria_is_the_plain_prompt() -> None:
    assert verification("  ") == VERIFY_PROMPT


def test_the_profile_turns_verification_on_and_refuses_criteria_without_it() -> None:
    on = Profile.parse(
        "p",
        {"verify_after_tools": True, "verify_criteria": "tests pass"},
        source="profile.toml",
        identity=None,
    )
    assert (on.settings.verify_after_tools, on.settings.verify_criteria) == (True, "tests pass")
    assert (
        Profile.parse("p", {}, source="profile.toml", identity=None).settings.verify_after_tools
        is False
    )
    with pytest.raises(ConfigError) as caught:
        Profile.parse("p", {"verify_criteria": "tests pass"}, source="profile.toml", identity=None)
    assert str(caught.value) == (
        "profile.toml: (top level): Value error, "
        "verify_criteria is only read with verify_after_tools = true"
    )
