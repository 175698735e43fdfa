"""The process wiring (`bots/app.py`) reloads the profile into the worker's runtime: an admin's
`/reload` in a chat (and the `reloader` other parts call) puts the edited SOUL.md and the
knowledge folder into the next request; a non-admin is refused. A real Anthropic SDK against
the fake, the SQLite store and bus of `serve`, one worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bots.app import Components, embedded
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
admins = ["telegram:A"]
[access.telegram]
dm_policy = "open"
"""
CHAT = Address(platform="telegram", bot="b", chat="42")
PATIENCE = 10.0
SECRET = "sk-ant-api03-knowledgeSecretValue0123456789"


async def answer(parts: Components, inbound: Inbound) -> Outbound:
    """The reply or notice the worker sends for `inbound`."""
    await hand_in(parts.worker, inbound)
    while True:
        delivery = await parts.bus.receive(
            outbound_queue("telegram"), consumer="t", timeout=PATIENCE
        )
        assert delivery is not None, "no answer"
        await delivery.ack()
        out = delivery.envelope
        assert isinstance(out, Outbound)
        if out.kind in ("reply", "notice") and out.reply_to == inbound.id:
            return out


def said(text: str, user: str = "A") -> Inbound:
    return Inbound(address=CHAT, user_id=user, text=text, is_direct=True)


def command(word: str, user: str) -> Inbound:
    return Inbound(
        address=CHAT, user_id=user, text=f"/{word}", is_direct=True, kind="command", command=word
    )


async def test_an_admins_reload_puts_the_edited_files_into_the_next_request(
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
    folder = tmp_path / "profiles" / "bot"
    (folder / "SOUL.md").write_text("You are Alpha.", encoding="utf-8")
    fake_anthropic.script(Text("one"), Text("two"))
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        task = asyncio.create_task(parts.worker.run())
        try:
            assert (await answer(parts, said("hi"))).text == "one"
            (folder / "SOUL.md").write_text("You are Beta.", encoding="utf-8")
            (folder / "knowledge").mkdir()
            (folder / "knowledge" / "ops.md").write_text(
                f"Open 9 to 5. Deploy key: {SECRET}", encoding="utf-8"
            )
            refused = await answer(parts, command("reload", user="B"))
            reloaded = await answer(parts, command("reload", user="A"))
            assert (await answer(parts, said("hi again"))).text == "two"
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)

    assert refused.text == "Only an admin of this bot can use /reload."
    assert reloaded.text == "Profile reloaded: SOUL.md, knowledge (from the next turn on)."
    before, after = (_system(r.json) for r in fake_anthropic.requests)
    assert "You are Alpha." in before and "Open 9 to 5." not in before
    assert "You are Beta." in after and "### ops.md\nOpen 9 to 5. Deploy key: " in after
    assert SECRET not in after


def _system(body: dict[str, object]) -> str:
    system = body["system"]
    if isinstance(system, str):
        return system
    assert isinstance(system, list)
    return "".join(str(block["text"]) for block in system)


async def test_an_extensions_reload_reaches_the_workers_profile_reloader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        PROFILE + '\n[hooks]\ninput = "tests.extension_modules.extensions:reload_profile"\n',
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        SWITCHBOARD_MODEL="claude-haiku-4-5",
    )
    folder = tmp_path / "profiles" / "bot"
    (folder / "SOUL.md").write_text("You are Alpha.", encoding="utf-8")
    fake_anthropic.script(Text("one"), Text("two"), Text("three"))
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        task = asyncio.create_task(parts.worker.run())
        try:
            assert (await answer(parts, said("hi"))).text == "one"
            (folder / "SOUL.md").write_text("You are Beta.", encoding="utf-8")
            # This turn's extension asks for the reload; the next turn runs on what it read.
            assert (await answer(parts, said("hi again", user="B"))).text == "two"
            assert (await answer(parts, said("and again", user="B"))).text == "three"
        finally:
            await asyncio.wait_for(parts.worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(task, PATIENCE)

    first, _, last = (_system(r.json) for r in fake_anthropic.requests)
    assert "You are Alpha." in first
    assert "You are Beta." in last
