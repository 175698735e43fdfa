"""Proactive notifications through `switchboard serve`, a subprocess, on the Telegram fake.

The hooks listener is started by `serve` (SWITCHBOARD_HOOKS_PORT), a hook's text and a hook's
agent turn reach the chat, and a scheduled answer's run record says `delivered` once the
gateway's receipt came back (`switchboard schedule runs`). The demo provider answers.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.processes import run_once, until
from tests.e2e.served import serve
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DM = 555
START_PATIENCE = 20.0
HOOKS_TOKEN = "e2e-hooks-token-0123456789abcdef"


@pytest.fixture
def env(fake_telegram: FakeTelegram, tmp_path: Path) -> dict[str, str]:
    """A clean environment with the hooks listener on and the DM as a hooks target."""
    profiles = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles" / "default", profiles / "default")
    with (profiles / "default" / "profile.toml").open("a", encoding="utf-8") as toml:
        toml.write(f'\n[hooks]\ntargets = ["telegram:{DM}"]\n')
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_", "REDIS_"))
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(profiles),
        SWITCHBOARD_HOOKS_PORT=str(free_port()),
        SWITCHBOARD_HOOKS_TOKEN=HOOKS_TOKEN,
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_URL=fake_telegram.url,
    )
    return keep


async def test_serve_delivers_hooks_and_records_scheduled_receipts(
    fake_telegram: FakeTelegram, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    code, out, err = await run_once(
        [
            "schedule",
            "add",
            "--in",
            "2s",
            "--misfire",
            "run_once",
            "--prompt",
            "what is 6*7?",
            "--deliver-to",
            f"telegram:{DM}",
        ],
        env,
        tmp_path,
    )
    assert code == 0, err
    found = re.search(r"Added schedule (\w+)", out)
    assert found, out
    schedule_id = found.group(1)
    url = f"http://127.0.0.1:{env['SWITCHBOARD_HOOKS_PORT']}"
    headers = {"Authorization": f"Bearer {HOOKS_TOKEN}"}

    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        async with aiohttp.ClientSession(headers=headers) as http:
            hook = {"to": f"telegram:{DM}", "text": "Nightly build is green.", "name": "ci"}
            async with http.post(f"{url}/hooks/notify", json=hook) as response:
                assert response.status == 202, await response.text()
            agent = {"to": f"telegram:{DM}", "prompt": "hello from ci", "session": "ci"}
            async with http.post(f"{url}/hooks/agent", json=agent) as response:
                assert response.status == 202, await response.text()
            async with http.post(f"{url}/hooks/notify", json={**hook, "to": "telegram:9"}) as no:
                assert no.status == 403

        await reply_containing(fake, DM, "Nightly build is green.")
        await reply_containing(fake, DM, "You said: hello from ci")
        scheduled = await reply_containing(fake, DM, "The answer is 42")

        # The receipt is recorded moments after the message was sent: look until it shows.
        async def receipt_listed() -> bool:
            code, out, err = await run_once(["schedule", "runs", schedule_id], env, tmp_path)
            assert code == 0, err
            return f"yes ({scheduled.message_id})" in out

        await until(receipt_listed, START_PATIENCE, "the run's receipt", lambda: served.log)
        assert await served.terminate(5.0) == 0

    assert "Traceback" not in served.log, served.log
    assert HOOKS_TOKEN not in served.log
