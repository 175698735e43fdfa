"""Extensions (`[hooks] input`, `before_agent_start`, `context`): loading them from import
paths, validating what they answer, failing open and closed, and what the context asks of
the turn (abort, compaction, reload). The turn itself: tests/integration/test_extensions.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from core.errors import ConfigError
from core.events import Cancelled, RunFailed
from core.extensions import (
    EXTENSION_FAILED,
    Extensions,
    ExtensionStop,
    InputEvent,
    load_extensions,
)
from core.messages import Message
from core.modes import FULL
from core.profile import Profile
from core.tool_hooks import HookEntry
from core.turn_state import ChannelContext, TurnState
from tests.extension_modules import extensions as ext

E = "tests.extension_modules.extensions"
CONTEXT = ChannelContext(platform="telegram", mode=FULL, user_id="u7")


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    ext.SEEN.clear()
    yield
    ext.SEEN.clear()


def state() -> TurnState:
    made = TurnState()
    made.session_id = "s1"
    return made


async def on_input(extensions: Extensions, text: str, turn: TurnState | None = None) -> Message:
    return await extensions.on_input(Message.user(text), "r1", CONTEXT, turn or state())


def load(**points: Any) -> Extensions:
    return load_extensions(**points, source="profile.toml [hooks]")


# Loading


def test_a_profile_names_extensions_in_hooks_and_they_load() -> None:
    profile = Profile.parse(
        "t",
        {
            "hooks": {
                "input": [f"{E}:shout", {"call": f"{E}:record", "fail": "open"}],
                "before_agent_start": f"{E}:pirate",
                "context": f"{E}:last_message_only",
                "timeout": 2,
            }
        },
        source="profile.toml",
        identity=None,
    )
    loaded = profile.settings.hooks.extensions()
    assert [(h.path, h.fail, h.timeout) for h in loaded.input] == [
        (f"{E}:shout", "closed", 2),
        (f"{E}:record", "open", 2),
    ]
    assert [h.function for h in loaded.before_agent_start] == [ext.pirate]
    assert [h.function for h in loaded.context] == [ext.last_message_only]
    assert loaded
    assert not Extensions()


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        (f"{E}:one_argument", "must take 2 arguments (the event, the context)"),
        (f"{E}:missing", "has no missing"),
        ("tests.extension_modules.nowhere:f", "cannot import tests.extension_modules.nowhere"),
        (E, "is not an import path"),
    ],
)
def test_a_bad_extension_path_is_a_one_line_config_error(path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(context=[path])
    message = str(caught.value)
    assert message.startswith("profile.toml [hooks] context: ")
    assert problem in message
    assert "\n" not in message


# Answers


async def test_input_replacements_compose_and_a_reply_stops_the_rest() -> None:
    turn = state()
    shouted = await on_input(load(input=[f"{E}:shout", f"{E}:record"]), "hello", turn)
    assert shouted.text == "HELLO"
    [seen] = ext.SEEN
    assert isinstance(seen, InputEvent) and seen.text == "HELLO" and seen.user_id == "u7"
    assert turn.requests.reply is None

    ext.SEEN.clear()
    answered = state()
    await on_input(load(input=[f"{E}:answer_ping", f"{E}:record"]), "ping", answered)
    assert answered.requests.reply == "pong (from an extension)"
    assert ext.SEEN == []


@pytest.mark.parametrize("bad", ["raises", "wrong_answer", "hangs"])
async def test_a_failing_extension_fails_closed_by_default(
    bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    extensions = load(input=[f"{E}:{bad}"], timeout=0.05)
    with (
        caplog.at_level(logging.WARNING, logger="core.extensions"),
        pytest.raises(ExtensionStop) as stopped,
    ):
        await on_input(extensions, "hello")
    final = stopped.value.final("r1")
    assert isinstance(final, RunFailed)
    assert final.message == EXTENSION_FAILED
    assert f"{E}:{bad}" in final.detail
    assert "sk-ant-api03" not in caplog.text  # the extension's message is scrubbed


async def test_an_answer_of_another_point_is_a_failure() -> None:
    extensions = Extensions(
        before_agent_start=load(before_agent_start=f"{E}:wrong_point").before_agent_start
    )
    with pytest.raises(ExtensionStop, match="not a AgentStartResult"):
        await extensions.on_agent_start("system", "r1", CONTEXT, state())


async def test_a_failing_extension_set_to_fail_open_changes_nothing() -> None:
    extensions = load(input=[HookEntry(call=f"{E}:raises", fail="open"), f"{E}:shout"])
    assert (await on_input(extensions, "hello")).text == "HELLO"


# What the context asks


async def test_abort_ends_the_turn_as_a_stop_does(caplog: pytest.LogCaptureFixture) -> None:
    extensions = load(before_agent_start=f"{E}:abort_turn")
    with (
        caplog.at_level(logging.INFO, logger="core.extensions"),
        pytest.raises(ExtensionStop) as stopped,
    ):
        await extensions.on_agent_start("system", "r1", CONTEXT, state())
    assert isinstance(stopped.value.final("r1"), Cancelled)
    assert "the operator's extension said no" in caplog.text


async def test_a_compaction_request_is_kept_for_the_runtime_once() -> None:
    turn = state()
    await on_input(load(input=f"{E}:compact_first"), "hello", turn)
    assert turn.requests.take_compaction()
    assert not turn.requests.take_compaction()


async def test_reload_calls_the_reloader_or_says_it_is_not_available(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reloads: list[str] = []

    async def reloader() -> None:
        reloads.append("reloaded")

    loaded = load(input=f"{E}:reload_profile")
    await on_input(Extensions(loaded.input, reload=reloader), "hello")
    assert reloads == ["reloaded"]

    with caplog.at_level(logging.INFO, logger="core.extensions"):
        await on_input(loaded, "hello")
    assert "reload is not available here" in caplog.text
    assert reloads == ["reloaded"]


# The example of docs/extensions.md


async def test_the_documented_example_keeps_recent_messages_from_a_user_message() -> None:
    extensions = load(context="tests.extension_modules.examples:keep_recent")
    history = [Message.user("q0"), Message.assistant("a0")]
    history += [Message.user("q1"), Message.assistant("a1"), Message.user("q2")]
    history += [Message.assistant("a2"), Message.user("q3")]
    turn = state()
    sent = await extensions.on_context(history, "r1", CONTEXT, turn)
    assert [m.text for m in sent] == ["q1", "a1", "q2", "a2", "q3"]
    assert not turn.requests.take_compaction()

    short = history[-3:]
    assert await extensions.on_context(short, "r1", CONTEXT, turn) == short
