"""The operator's tool hooks (`[hooks] before_tool` / `after_tool`): loading them from import
paths, each decision (allow, block, patch, note), failing open and closed, sync and async.

Turns run on a scripted provider against the real SQLite store; the hooks are the modules of
`tests/hook_modules/`, named by import path as a profile names them."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.envelopes import Address
from core.errors import ConfigError
from core.events import AgentEvent, RunCompleted, ToolFinished
from core.messages import Message, ToolCall
from core.modes import FULL, SAFE_CHAT, CapabilityMode
from core.profile import Profile
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tool_hooks import HookEntry, ToolHooks, load_tool_hooks
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from tests.hook_modules import policy

P = "tests.hook_modules.policy"


class Say(BaseModel):
    """Arguments of the test tools."""

    text: str


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    policy.SEEN.clear()
    yield
    policy.SEEN.clear()


def say_tool(name: str, ran: list[str], tier: SafetyTier = SafetyTier.READ_ONLY) -> Tool[Any]:
    async def run(args: Say, _ctx: ToolContext) -> str:
        ran.append(args.text)
        return f"said {args.text} 42"

    return Tool(name=name, description="Say.", args=Say, tier=tier, run=run)


def hooks(
    before: str | Sequence[str | HookEntry] = (),
    after: str | Sequence[str | HookEntry] = (),
    **options: Any,
) -> ToolHooks:
    return load_tool_hooks(before_tool=before, after_tool=after, **options)


async def turn(
    store: SqlStore,
    session_id: str,
    tool_hooks: ToolHooks,
    tools: Iterable[Tool[Any]],
    *,
    name: str = "echo",
    arguments: dict[str, Any] | None = None,
    mode: CapabilityMode = FULL,
) -> tuple[ToolFinished, ScriptedProvider]:
    """One turn whose model asks for one tool call, then answers; the call's event."""
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name=name, arguments=arguments or {"text": "hi"})),
            text_reply("Done."),
        ]
    )
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry(tools),
        store=store,
        tool_hooks=tool_hooks,
    )
    context = ChannelContext(
        platform="telegram",
        mode=mode,
        session_key="telegram:b:42",
        user_id="u7",
        address=Address(platform="telegram", bot="b", chat="42"),
    )
    events: list[AgentEvent] = [
        e async for e in runtime.run(session_id, Message.user("go"), context)
    ]
    assert isinstance(events[-1], RunCompleted)
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    return finished, provider


def tool_result_seen(provider: ScriptedProvider) -> str:
    """The tool result the model's second call of the turn read (the session's latest)."""
    return [m for m in provider.requests[1].messages if m.role == "tool"][-1].text


# Loading


def test_a_profile_names_hooks_by_import_path_and_they_load() -> None:
    profile = Profile.parse(
        "t",
        {
            "hooks": {
                "before_tool": [f"{P}:deny_echo", {"call": f"{P}:record", "fail": "open"}],
                "after_tool": f"{P}:redact_result",
                "timeout": 2,
            }
        },
        source="profile.toml",
        identity=None,
    )
    options = profile.settings.hooks
    loaded = load_tool_hooks(
        before_tool=options.before_tool,
        after_tool=options.after_tool,
        fail=options.fail,
        timeout=options.timeout,
    )
    assert [(h.path, h.fail, h.timeout) for h in loaded.before] == [
        (f"{P}:deny_echo", "closed", 2),
        (f"{P}:record", "open", 2),
    ]
    assert [h.function for h in loaded.after] == [policy.redact_result]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("tests.hook_modules.policy", "is not an import path"),
        ("tests.hook_modules.nowhere:check", "cannot import tests.hook_modules.nowhere"),
        (f"{P}:missing", "has no missing"),
        (f"{P}:NOT_CALLABLE", "is not callable"),
        (f"{P}:two_arguments", "must take one argument"),
    ],
)
def test_a_bad_hook_path_is_a_one_line_config_error(path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_tool_hooks(before_tool=[path], source="profile.toml [hooks]")
    message = str(caught.value)
    assert message.startswith("profile.toml [hooks] before_tool: ")
    assert problem in message
    assert "\n" not in message


def test_a_bad_fail_setting_is_refused_by_the_profile() -> None:
    with pytest.raises(ConfigError, match=r"hooks\.fail"):
        Profile.parse("t", {"hooks": {"fail": "maybe"}}, source="profile.toml", identity=None)


# Decisions


async def test_the_hook_sees_a_typed_event_of_the_call(store: SqlStore, session_id: str) -> None:
    ran: list[str] = []
    finished, _ = await turn(store, session_id, hooks(f"{P}:record"), [say_tool("echo", ran)])

    [event] = policy.SEEN
    assert event.tool == "echo"
    assert event.arguments == {"text": "hi"}
    assert event.call_id == "c1"
    assert event.session_id == session_id
    assert event.address == "telegram:42"
    assert event.user_id == "u7"
    assert event.mode == "full"
    assert ran == ["hi"]
    assert finished.blocked_by == "" and finished.patched_by == []


@pytest.mark.parametrize("hook", ["deny_echo", "deny_echo_async"])
async def test_a_block_stops_the_tool_and_the_model_reads_the_reason(
    store: SqlStore, session_id: str, hook: str
) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store, session_id, hooks(f"{P}:{hook}"), [say_tool("echo", ran)]
    )

    assert ran == []
    assert finished.is_error
    assert finished.blocked_by == f"{P}:{hook}"
    assert tool_result_seen(provider) == "echo is switched off here by the operator."


async def test_the_first_block_decides_and_later_hooks_are_not_asked(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    await turn(store, session_id, hooks([f"{P}:deny_echo", f"{P}:record"]), [say_tool("echo", ran)])
    assert policy.SEEN == []


async def test_argument_patches_compose_sync_then_async(store: SqlStore, session_id: str) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store, session_id, hooks([f"{P}:shout", f"{P}:exclaim"]), [say_tool("echo", ran)]
    )

    assert ran == ["HI!"]
    assert finished.patched_by == [f"{P}:shout", f"{P}:exclaim"]
    assert finished.arguments == {"text": "HI!"}
    assert tool_result_seen(provider) == "said HI! 42"


async def test_a_patch_the_tool_schema_refuses_does_not_run(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store, session_id, hooks(f"{P}:bad_patch"), [say_tool("echo", ran)]
    )

    assert ran == []
    assert finished.is_error
    seen = tool_result_seen(provider)
    assert f"A hook ({P}:bad_patch) changed the arguments" in seen
    assert "Invalid arguments for echo" in seen


async def test_a_patch_cannot_make_a_tool_run_the_mode_refuses(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    finished, _ = await turn(
        store,
        session_id,
        hooks(f"{P}:shout"),
        [say_tool("danger", ran, SafetyTier.PRIVILEGED)],
        name="danger",
        mode=SAFE_CHAT,
    )

    assert ran == []
    assert finished.is_error
    assert finished.patched_by == [f"{P}:shout"]


async def test_a_note_reaches_the_model_with_the_result(store: SqlStore, session_id: str) -> None:
    ran: list[str] = []
    _, provider = await turn(store, session_id, hooks(f"{P}:note"), [say_tool("echo", ran)])

    assert ran == ["hi"]
    assert tool_result_seen(provider) == "said hi 42\n\nNote: the operator watches echo"


async def test_result_patches_compose_and_a_result_block_replaces_it(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store,
        session_id,
        hooks(after=[f"{P}:redact_result", f"{P}:bracket_result"]),
        [say_tool("echo", ran)],
    )
    assert tool_result_seen(provider) == "[said hi ##]"
    assert finished.patched_by == [f"{P}:redact_result", f"{P}:bracket_result"]

    finished, provider = await turn(
        store, session_id, hooks(after=f"{P}:withhold_result"), [say_tool("echo", ran)]
    )
    assert ran == ["hi", "hi"]
    assert finished.is_error
    assert finished.blocked_by == f"{P}:withhold_result"
    assert tool_result_seen(provider) == "the result is withheld"


async def test_a_callable_object_with_an_async_call_is_a_hook(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    before = policy.COUNTER.calls
    await turn(store, session_id, hooks(f"{P}:COUNTER"), [say_tool("echo", ran)])
    assert policy.COUNTER.calls == before + 1
    assert ran == ["hi"]


# Failing open and closed


@pytest.mark.parametrize(
    ("hook", "what"),
    [
        ("raises", "failed"),
        ("hangs", "timed out after 0.05s"),
        ("junk", "answered something that is not a decision"),
    ],
)
async def test_a_failing_hook_fails_closed_by_default(
    store: SqlStore, session_id: str, hook: str, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    caplog.set_level(logging.WARNING, logger="core.tool_hooks")
    finished, provider = await turn(
        store, session_id, hooks(f"{P}:{hook}", timeout=0.05), [say_tool("echo", ran)]
    )

    assert ran == []
    assert finished.blocked_by == f"{P}:{hook}"
    assert tool_result_seen(provider) == (
        f"Tool 'echo' was blocked: the policy hook {P}:{hook} {what}."
    )
    assert f"hook {P}:{hook} (before_tool)" in caplog.text
    assert "sk-proj-abcdefghij" not in caplog.text


@pytest.mark.parametrize("hook", ["raises", "hangs", "junk"])
async def test_a_failing_hook_set_open_lets_the_call_run(
    store: SqlStore, session_id: str, hook: str
) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store,
        session_id,
        hooks([HookEntry(call=f"{P}:{hook}", fail="open", timeout=0.05), f"{P}:shout"]),
        [say_tool("echo", ran)],
    )

    assert ran == ["HI"]
    assert not finished.is_error
    assert finished.blocked_by == ""
    assert tool_result_seen(provider) == "said HI 42"


async def test_a_failing_after_hook_closed_withholds_the_result(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    finished, provider = await turn(
        store, session_id, hooks(after=f"{P}:raises"), [say_tool("echo", ran)]
    )
    assert ran == ["hi"]
    assert finished.is_error
    assert tool_result_seen(provider) == (
        f"Tool 'echo' was blocked: the policy hook {P}:raises failed."
    )

    finished, provider = await turn(
        store, session_id, hooks(after=f"{P}:raises", fail="open"), [say_tool("echo", ran)]
    )
    assert not finished.is_error
    assert tool_result_seen(provider) == "said hi 42"


# The examples of docs/hooks.md


async def test_the_domain_example_blocks_web_fetch_to_a_listed_domain_only(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    fetch = say_tool("web_fetch", ran)
    example = hooks("tests.hook_modules.examples:block_domains")
    finished, provider = await turn(
        store,
        session_id,
        example,
        [fetch],
        name="web_fetch",
        arguments={"text": "x", "url": "https://docs.internal.example.com/a"},
    )
    assert ran == []
    assert finished.blocked_by == "tests.hook_modules.examples:block_domains"
    assert tool_result_seen(provider) == (
        "Fetching from docs.internal.example.com is not allowed here; do not retry it."
    )

    finished, _ = await turn(
        store,
        session_id,
        example,
        [fetch],
        name="web_fetch",
        arguments={"text": "y", "url": "https://example.com/"},
    )
    assert ran == ["y"]
    assert not finished.is_error


async def test_the_email_example_hides_addresses_and_tells_the_model(
    store: SqlStore, session_id: str
) -> None:
    ran: list[str] = []
    _, provider = await turn(
        store,
        session_id,
        hooks(after="tests.hook_modules.examples:hide_emails"),
        [say_tool("echo", ran)],
        arguments={"text": "mail ann@example.com"},
    )
    assert tool_result_seen(provider) == (
        "said mail [email] 42\n\n"
        "Note: 1 email address(es) were hidden by policy; do not ask for them."
    )
