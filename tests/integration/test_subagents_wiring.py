"""The process wiring (`bots/app.py`) offers `delegate` in `full` mode with the profile's
`[subagents]` limits: a real Anthropic SDK against the fake, the SQLite store and bus of
`serve`, one worker. The child's calls go over the same wire and are charged to the person."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings
from core.bus import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.llm_script import Text, ToolUse
from tests.profile_env import profile_env
from tests.workers import hand_in

PROFILE = """
admins = ["telegram:A"]
[access.telegram]
dm_policy = "open"
[subagents]
max_steps = 1
"""
CHAT = Address(platform="telegram", bot="b", chat="42")
PATIENCE = 10.0


async def test_serve_wiring_runs_a_delegated_task_within_the_profiles_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        PROFILE,
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        SWITCHBOARD_MODEL="claude-haiku-4-5",
    )
    fake_anthropic.script(
        ToolUse([("d1", "delegate", {"task": "Count to three."})]),
        # The child's one step (max_steps = 1) asks for a tool: it stops there.
        ToolUse([("c1", "calculator", {"expression": "1+2"})]),
        Text("The helper could not finish."),
    )
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    inbound = Inbound(address=CHAT, user_id="A", text="delegate it", is_direct=True)

    async with embedded(settings, profile) as parts:
        task = asyncio.create_task(parts.worker.run())
        final: Outbound | None = None
        try:
            await hand_in(parts.worker, inbound)
            while final is None:
                delivery = await parts.bus.receive(
                    outbound_queue("telegram"), consumer="t", timeout=PATIENCE
                )
                assert delivery is not None, "no answer"
                await delivery.ack()
                out = delivery.envelope
                assert isinstance(out, Outbound)
                if out.kind in ("reply", "notice") and out.reply_to == inbound.id:
                    final = out
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)
        by_person = await parts.store.costs_by("user")

    assert final.text == "The helper could not finish."
    parent_first, child, parent_second = (r.json for r in fake_anthropic.requests)
    assert "delegate" in [t["name"] for t in parent_first["tools"]]
    assert "delegate" not in [t["name"] for t in child["tools"]]
    assert child["messages"][0]["content"][0]["text"] == "Count to three."
    result = parent_second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "within 1 steps" in str(result["content"])
    # Both the parent's calls and the child's one count to the person.
    assert [(g.key, g.calls) for g in by_person] == [("telegram:A", 3)]
