"""The process wiring (`bots/app.py`) applies a profile's `[budgets]` and `[limits]`: a real
Anthropic SDK against the fake, the SQLite store and bus of `serve`, one worker."""

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
from tests.fakes.llm_script import Text
from tests.profile_env import profile_env
from tests.workers import hand_in

PROFILE = """
[access.telegram]
dm_policy = "open"
[budgets]
per_chat_daily = 0.000001
[limits]
rate_limit = "1/minute"
"""
CHAT = Address(platform="telegram", bot="b", chat="42")
PATIENCE = 10.0


async def test_serve_wiring_refuses_over_budget_and_over_rate(
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
    fake_anthropic.script(Text("first answer"))
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    alice = [Inbound(address=CHAT, user_id="A", text=t, is_direct=True) for t in ("1", "3")]
    bob = Inbound(address=CHAT, user_id="B", text="2", is_direct=True)

    async with embedded(settings, profile) as parts:
        task = asyncio.create_task(parts.worker.run())
        finals: dict[str, Outbound] = {}
        try:
            for inbound in (alice[0], bob, alice[1]):
                await hand_in(parts.worker, inbound)
                while inbound.id not in finals:
                    delivery = await parts.bus.receive(
                        outbound_queue("telegram"), consumer="t", timeout=PATIENCE
                    )
                    assert delivery is not None, f"no answer to {inbound.text}"
                    await delivery.ack()
                    out = delivery.envelope
                    assert isinstance(out, Outbound)
                    if out.kind in ("reply", "notice") and out.reply_to:
                        finals[out.reply_to] = out
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)
        by_chat = await parts.store.costs_by("chat")

    assert finals[alice[0].id].text == "first answer"
    # Bob is in the same chat, whose day's budget Alice's answer used up.
    assert finals[bob.id].text.startswith("This chat has reached its daily spending limit")
    assert finals[alice[1].id].kind == "notice"
    assert "faster than I answer (1 per minute)" in finals[alice[1].id].text
    assert len(fake_anthropic.requests) == 1
    assert [(g.key, g.calls) for g in by_chat] == [("telegram:b:42", 1)]
