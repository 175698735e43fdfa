"""A running runtime takes its profile's changed files on reload (`core/reload.py`): the real
profile loader on real files, the SQLite store, a scripted model that records each request.

The next turn holds the new SOUL.md, knowledge and skills; a turn in flight keeps the prompt
it started with; a profile that no longer loads is refused and the running one kept.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from functools import partial
from pathlib import Path

import pytest

from bots.commands.reload import reload_on_hangup
from bots.profiles import load_profile
from core.backends.sql.store import SqlStore
from core.messages import Message, ToolCall
from core.modes import FULL
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import Reply, text_reply, tool_reply
from core.reload import ProfileReloader, ReloadResult
from core.runtime import AgentRuntime, ChannelContext
from core.skills import READ_SKILL
from core.tools import ToolContext, ToolRegistry, builtin_tools
from core.tools.skills import read_skill_tool

PATIENCE = 5.0
SKILL = "---\nname: {name}\ndescription: How to {name}.\n---\nDo {name} well.\n"


def write(folder: Path, relative: str, text: str) -> None:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def running(
    tmp_path: Path, store: SqlStore, script: list[object]
) -> tuple[AgentRuntime, ScriptedProvider, ProfileReloader]:
    """A runtime over the profile `bot` as the process wiring builds one, and its reloader."""
    read = partial(load_profile, tmp_path, "bot")
    profile = read()
    provider = ScriptedProvider(script)  # type: ignore[arg-type]
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([*builtin_tools(), read_skill_tool(profile.skills)]),
        store=store,
        prompt=profile.system_prompt(),
    )
    return runtime, provider, ProfileReloader(profile, read, runtime)


async def turn(runtime: AgentRuntime, session_id: str, text: str) -> None:
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    async for _ in runtime.run(session_id, Message.user(text), context):
        pass


@pytest.fixture
def bot(tmp_path: Path) -> Path:
    folder = tmp_path / "bot"
    write(folder, "SOUL.md", "You are Alpha.")
    write(folder, "knowledge/hours.md", "Open 9 to 5.")
    write(folder, "skills/greet/SKILL.md", SKILL.format(name="greet"))
    return folder


async def test_the_next_turn_holds_the_new_soul_knowledge_and_skills(
    tmp_path: Path, bot: Path, store: SqlStore, session_id: str
) -> None:
    runtime, provider, reloader = running(tmp_path, store, [text_reply("one"), text_reply("two")])
    await turn(runtime, session_id, "hi")
    write(bot, "SOUL.md", "You are Beta.")
    write(bot, "knowledge/prices.md", "Tea costs 2 euros.")
    write(bot, "skills/part/SKILL.md", SKILL.format(name="part"))

    result = await reloader.reload()
    await turn(runtime, session_id, "hi again")

    assert result == ReloadResult(ok=True, applied=["SOUL.md", "skills", "knowledge"])
    before, after = (r.system for r in provider.requests)
    assert "You are Alpha." in before and "Tea costs" not in before
    assert "You are Beta." in after and "You are Alpha." not in after
    assert "### hours.md\nOpen 9 to 5." in after
    assert "### prices.md\nTea costs 2 euros." in after
    assert "- part — How to part." in after
    read = await runtime.tools.get(READ_SKILL)({"name": "part"}, ToolContext(session_id="s"))
    assert read == "Do part well."


async def test_a_turn_in_flight_finishes_with_the_prompt_it_started_with(
    tmp_path: Path, bot: Path, store: SqlStore, session_id: str
) -> None:
    runtime: AgentRuntime
    reloader: ProfileReloader

    async def reload_then_call_a_tool(_request: ModelRequest) -> Reply:
        write(bot, "SOUL.md", "You are Beta.")
        assert (await reloader.reload()).ok
        return tool_reply(ToolCall(id="c1", name="calculator", arguments={"expression": "1+1"}))

    runtime, provider, reloader = running(
        tmp_path, store, [reload_then_call_a_tool, text_reply("2"), text_reply("next")]
    )
    await turn(runtime, session_id, "what is 1+1?")
    await turn(runtime, session_id, "and now?")

    first_step, second_step, next_turn = (r.system for r in provider.requests)
    assert "You are Alpha." in first_step and "You are Alpha." in second_step
    assert "You are Beta." in next_turn


async def test_a_broken_profile_is_refused_and_the_running_one_kept(
    tmp_path: Path,
    bot: Path,
    store: SqlStore,
    session_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime, provider, reloader = running(tmp_path, store, [text_reply("still alpha")])
    write(bot, "SOUL.md", "You are Beta.")
    write(bot, "profile.toml", "max_stepz = 3\n")

    with caplog.at_level(logging.WARNING, logger="core.reload"):
        result = await reloader.reload()
    await turn(runtime, session_id, "hi")

    assert not result.ok
    assert "max_stepz" in result.error and "profile.toml" in result.error
    (line,) = [r.getMessage() for r in caplog.records if r.name == "core.reload"]
    assert line.startswith("profile reload refused, keeping the running profile: ")
    assert "You are Alpha." in provider.requests[0].system
    assert reloader.profile.identity == "You are Alpha."


async def test_settings_that_need_a_restart_are_named(
    tmp_path: Path, bot: Path, store: SqlStore
) -> None:
    _, _, reloader = running(tmp_path, store, [])
    write(bot, "profile.toml", "max_steps = 3\nknowledge_max_chars = 100\n")

    result = await reloader.reload()

    assert result == ReloadResult(ok=True, applied=["knowledge"], restart_needed=["max_steps"])


async def test_sighup_reloads_the_profile(
    tmp_path: Path, bot: Path, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="core.reload")
    runtime, _, reloader = running(tmp_path, store, [])
    write(bot, "SOUL.md", "You are Beta.")
    logged = _Logged("profile bot reloaded")
    logging.getLogger("core.reload").addHandler(logged)
    try:
        async with reload_on_hangup(reloader):
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.wait_for(logged.seen.wait(), PATIENCE)
    finally:
        logging.getLogger("core.reload").removeHandler(logged)

    assert runtime.prompt.identity == "You are Beta."


class _Logged(logging.Handler):
    """Sets `seen` when a record starting with `text` is logged (on the loop's thread)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.text):
            self.seen.set()
