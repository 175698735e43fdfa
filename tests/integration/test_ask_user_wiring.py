"""The process wiring (`bots/app.py`) offers `ask_user` in a Telegram DM (`safe-chat`) with
the profile's `ask_timeout`: a real Anthropic SDK against the fake, the SQLite store and bus of
`serve`, one worker. Nobody answers, so the model reads that no answer came, and goes on."""

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
ask_timeout = 0.2
[access.telegram]
dm_policy = "open"
"""
CHAT = Address(platform="telegram", bot="b", chat="42")
PATIENCE = 10.0


async def test_serve_wiring_asks_and_goes_on_after_the_profiles_ask_timeout(
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
        ToolUse([("a1", "ask_user", {"question": "Which colour?"})]),
        Text("I will pick blue, then."),
    )
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    inbound = Inbound(address=CHAT, user_id="B", text="make me a logo", is_direct=True)

    async with embedded(settings, profile) as parts:
        task = asyncio.create_task(parts.worker.run())
        seen: list[Outbound] = []
        try:
            await hand_in(parts.worker, inbound)
            while not any(o.kind == "reply" and o.reply_to == inbound.id for o in seen):
                delivery = await parts.bus.receive(
                    outbound_queue("telegram"), consumer="t", timeout=PATIENCE
                )
                assert delivery is not None, f"no answer; saw {seen}"
                await delivery.ack()
                assert isinstance(delivery.envelope, Outbound)
                seen.append(delivery.envelope)
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)

    assert [o.text for o in seen if o.kind == "question"] == ["Which colour?"]
    first, second = (r.json for r in fake_anthropic.requests)
    assert "ask_user" in [t["name"] for t in first["tools"]]
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert str(result["content"]).count("No answer came within 0.2 s") == 1
