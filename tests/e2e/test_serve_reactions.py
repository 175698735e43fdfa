"""Status reactions through `switchboard serve`, a subprocess, against the Telegram Bot API fake:
on by default, off with `[channels.telegram] reactions = false` in the profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.processes import open_profiles
from tests.e2e.served import serve
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import calls_to, reply_containing, until

pytestmark = pytest.mark.e2e

DM = 555
# Starting the process imports python-telegram-bot and opens the database: allow for a slow
# machine. Only reached when something is broken.
START_PATIENCE = 20.0


def _env(fake: FakeTelegram, tmp_path: Path, profiles: Path) -> dict[str, str]:
    """A clean environment: own data dir, the given profiles, no keys, the fake's URL."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_"))
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(profiles),
        TELEGRAM_BOT_TOKEN=fake.token,
        TELEGRAM_API_URL=fake.url,
    )
    return keep


async def test_serve_marks_a_message_taken_then_answered(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake = fake_telegram
    async with serve(_env(fake, tmp_path, open_profiles(tmp_path)), tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        asked = fake.private_text(DM, "hello there")["message"]["message_id"]
        await reply_containing(fake, DM, "You said: hello there")
        await until(fake, lambda: fake.reactions.get((DM, asked)) == ["👍"], "the answered mark")

    marks = [
        [r["emoji"] for r in c.params["reaction"]] for c in calls_to(fake, "setMessageReaction")
    ]
    assert marks == [["👀"], ["👍"]]


async def test_serve_sets_no_reaction_when_the_profile_turns_them_off(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake = fake_telegram
    profiles = open_profiles(tmp_path)
    with (profiles / "default" / "profile.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n[channels.telegram]\nreactions = false\n")
    async with serve(_env(fake, tmp_path, profiles), tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(DM, "one")
        await reply_containing(fake, DM, "You said: one")
        # One chat's deliveries go out in order: once the second answer is there, whatever
        # the first turn would have set is set.
        fake.private_text(DM, "two")
        await reply_containing(fake, DM, "You said: two")

    assert calls_to(fake, "setMessageReaction") == []
