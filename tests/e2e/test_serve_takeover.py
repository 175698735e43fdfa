"""Taking a Telegram DM over while `switchboard serve` runs (the acceptance of issue 35, point 1).

`switchboard takeover`: the person's message is stored, the model (the OpenAI fake, which
records every request) is not called and the bot sends nothing; `switchboard notify` reaches
the chat and is stored as the operator's; after `switchboard handback` the bot answers with
the whole history, the handback note included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.processes import clean_env, run_once, until
from tests.e2e.served import serve
from tests.fakes import FakeOpenAI, Text
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e

DM = 555
START_PATIENCE = 20.0
STOP_PATIENCE = 5.0


@pytest.fixture
def env(fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, open profiles, the fakes' URLs."""
    return clean_env(
        tmp_path,
        redis_url=None,
        telegram=fake_telegram,
        openai=fake_openai,
        SWITCHBOARD_MODEL="gpt-4o-mini",
    )


async def test_a_taken_over_dm_gets_no_model_call_until_handed_back(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    session_key = f"telegram:{fake.token.partition(':')[0]}:{DM}"
    fake_openai.script(Text("Welcome back, the bot here."))

    async def stored() -> list[tuple[str, str | None, str]]:
        code, out, _ = await run_once(["sessions", "export", session_key], env, tmp_path)
        if code != 0:
            return []  # no conversation yet
        return [(m["role"], m.get("speaker"), m["text"]) for m in json.loads(out)["messages"]]

    async def holds(wanted: tuple[str, str | None, str]) -> bool:
        return wanted in await stored()

    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        code, out, err = await run_once(
            ["takeover", f"telegram:{DM}", "--for", "2h"], env, tmp_path
        )
        assert code == 0, err
        assert f"Took over telegram:{DM}" in out
        code, out, err = await run_once(["takeover", "--list"], env, tmp_path)
        assert code == 0 and f"telegram:{DM}" in out, err

        fake.private_text(DM, "I need a human, please")
        await until(
            lambda: holds(("user", None, "I need a human, please")),
            START_PATIENCE,
            "the person's message stored",
            lambda: served.log,
        )
        code, out, err = await run_once(["notify", f"telegram:{DM}", "Bob here."], env, tmp_path)
        assert code == 0, err
        await reply_containing(fake, DM, "Bob here.")
        await until(
            lambda: holds(("assistant", "operator", "Bob here.")),
            START_PATIENCE,
            "the operator's message stored",
        )
        assert fake_openai.requests == []
        assert fake.sent_texts(DM) == ["Bob here."]

        code, out, err = await run_once(["handback", f"telegram:{DM}"], env, tmp_path)
        assert code == 0, err
        assert "Handed telegram:555 back" in out
        fake.private_text(DM, "thanks!")
        await reply_containing(fake, DM, "Welcome back, the bot here.")
        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log

    assert len(fake_openai.requests) == 1
    shown = json.dumps(fake_openai.requests[0].json["messages"])
    for part in ("I need a human, please", "Bob here.", "answered in this chat", "thanks!"):
        assert part in shown
    assert fake.sent_texts(DM) == ["Bob here.", "Welcome back, the bot here."]


async def test_bad_addresses_and_durations_are_one_line_and_exit_2(
    env: dict[str, str], tmp_path: Path
) -> None:
    for args in (
        ("takeover", "nowhere:1"),
        ("takeover", f"telegram:{DM}", "--for", "soon-ish"),
        ("handback", "telegram"),
    ):
        code, out, err = await run_once([*args], env, tmp_path)
        assert code == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
