"""Messages while busy through `switchboard serve` (a subprocess) and the Telegram fake: three
messages sent while a turn runs join it (`busy = "steer"`, the default), and one answer
covers them all, nothing lost, nothing answered twice.

The OpenAI fake plays the model: its first call waits until the test lets it go, then asks
for a tool, so the turn calls the model again; the second call answers with every message the
person sent that it saw.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.processes import open_profiles
from tests.e2e.served import serve
from tests.e2e.test_serve_telegram import DM, START_PATIENCE, STOP_PATIENCE, answer_with
from tests.fakes import FakeOpenAI, Text
from tests.fakes.llm_script import ToolUse
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(fake_telegram: FakeTelegram, tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, the repo's profiles, no keys, the fake's URL."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_"))
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        # The product's default, which the other end-to-end tests set aside.
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path, busy="steer")),
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_URL=fake_telegram.url,
    )
    return keep


def said_by_the_person(body: dict[str, Any]) -> list[str]:
    """The texts of the user messages of an OpenAI chat request, oldest first."""
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("".join(p.get("text", "") for p in content if p.get("type") == "text"))
    return texts


async def test_three_messages_sent_during_a_turn_get_one_answer_that_covers_them(
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    asked, go = asyncio.Event(), asyncio.Event()

    async def first_call(body: dict[str, Any]) -> ToolUse:
        asked.set()
        await go.wait()
        return ToolUse(calls=[("c1", "current_time", {})])

    def echo(body: dict[str, Any]) -> Text:
        return Text("Saw: " + " | ".join(said_by_the_person(body)))

    fake_openai.script(first_call, echo, echo)
    answer_with(env, fake_openai)
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(DM, "first")
        await served.until_ready(asked.wait(), START_PATIENCE)
        for text in ("second", "third", "fourth"):
            fake.private_text(DM, text)
        # The bot confirms an update only once its mailbox holds it: all three wait there.
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        go.set()

        await reply_containing(fake, DM, "Saw: first | second | third | fourth")
        # The next message gets a turn of its own, after everything before it in the chat:
        # had any of the three waited for a turn of its own, its answer would be here by now.
        fake.private_text(DM, "and then?")
        await reply_containing(fake, DM, "and then?")
        assert await served.terminate(STOP_PATIENCE) == 0

    answers = [t for t in fake.sent_texts(DM) if t.startswith("Saw:")]
    assert answers == [
        "Saw: first | second | third | fourth",
        "Saw: first | second | third | fourth | and then?",
    ]
    assert fake_openai.pending == 0
    assert "Traceback" not in served.log, served.log
