"""Operating a running `switchboard serve`: `/metrics` after real turns through the Telegram
fake, and `switchboard status` from another process.

The OpenAI fake answers with known token counts for a priced model, so each counter and
histogram can be checked for the exact amount it moved.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.messages import Usage
from core.pricing import PriceBook
from tests.e2e.processes import open_profiles, run_once
from tests.e2e.served import serve
from tests.fakes.llm_script import Text, ToolUse
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
MODEL = "gpt-4o-mini"
TOKEN = "m" * 32
DM = 777
START_PATIENCE = 20.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when it was never recorded."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(port: int) -> Samples:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics", headers=headers) as response,
    ):
        assert response.status == 200
        return _samples(await response.text())


async def status(env: Mapping[str, str], cwd: Path) -> tuple[int, str]:
    """Exit code and output of `switchboard status`."""
    done = await run_once(["status"], dict(env), cwd)
    return done.returncode, done.stdout + done.stderr


def _env(fake: FakeTelegram, llm: FakeOpenAI, tmp_path: Path, port: int) -> Mapping[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_", "REDIS_"))
    }
    env.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        # The fake's users are strangers: a profile copy with open DMs answers them.
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        SWITCHBOARD_PROVIDER="openai",
        SWITCHBOARD_MODEL=MODEL,
        OPENAI_API_KEY=llm.api_key,
        OPENAI_BASE_URL=llm.url,
        TELEGRAM_BOT_TOKEN=fake.token,
        TELEGRAM_API_URL=fake.url,
        SWITCHBOARD_METRICS_PORT=str(port),
        SWITCHBOARD_METRICS_TOKEN=TOKEN,
        SWITCHBOARD_WEB_PORT="off",  # no web page: its port is shared by every test
        # The default level, with the turn lines of the info level.
        SWITCHBOARD_LOG_LEVEL="warning,core.turns=info",
    )
    return env


async def test_counters_and_histograms_move_by_what_the_turns_did(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    tool_call = ToolUse([("c1", "calculator", {"expression": "6*7"})], input_tokens=100)
    after_tool = Text("It is 42.", input_tokens=150, output_tokens=7)
    plain = Text("Hello there.", input_tokens=80, output_tokens=4)
    fake_openai.script(tool_call, after_tool, plain)
    port = free_port()

    env = _env(fake, fake_openai, tmp_path, port)
    async with serve(dict(env), tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        before = await scrape(port)
        assert value(before, "switchboard_turns_total", platform="telegram") == 0

        fake.private_text(DM, "what is 6*7?")
        await reply_containing(fake, DM, "It is 42.")
        fake.private_text(DM, "hello")
        await reply_containing(fake, DM, "Hello there.")
        # A streamed reply shows before its turn ends: wait for the second turn's line (logged
        # right after its metrics are recorded).
        while served.log.count(" turn completed: ") < 2:
            served.grew.clear()
            await served.grew.wait()
        # The line comes before the message's last writes (its processed mark, then its
        # removal from the mailbox): the mailbox empties a moment later.
        after = await scrape(port)
        async with asyncio.timeout(10):
            while value(after, "switchboard_mailbox_waiting") != 0:
                await asyncio.sleep(0.05)  # waiting on another process, bounded
                after = await scrape(port)
        code, shown = await status(env, tmp_path)
        assert code == 0, shown
        assert "Processes using" in shown and "switchboard.db" in shown, shown
        assert "serve telegram" in shown and f":{served.process.pid}" in shown, shown
        assert "mailboxes" in shown and "0 waiting" in shown, shown
        assert await served.terminate(5.0) == 0

    code, shown = await status(env, tmp_path)
    assert code == 0, shown
    assert "No process is running against" in shown, shown

    turn = {"platform": "telegram", "mode": "safe-chat"}
    assert value(after, "switchboard_turns_total", **turn, outcome="completed") == 2
    assert value(after, "switchboard_turn_seconds_count", platform="telegram") == 2
    assert value(after, "switchboard_first_token_seconds_count", platform="telegram") == 2
    # Each histogram's sum is real time: some of it was spent.
    assert value(after, "switchboard_turn_seconds_sum", platform="telegram") > 0

    model = {"provider": "openai", "model": MODEL}
    assert value(after, "switchboard_model_calls_total", **model) == 3
    assert value(after, "switchboard_model_tokens_total", **model, kind="input") == 330
    assert value(after, "switchboard_model_tokens_total", **model, kind="output") == 5 + 7 + 4
    price = PriceBook().cost
    expected = sum(
        price(MODEL, Usage(input_tokens=i, output_tokens=o)) or 0.0
        for i, o in ((100, 5), (150, 7), (80, 4))
    )
    assert value(after, "switchboard_cost_usd_total", **model) == pytest.approx(expected)
    assert value(after, "switchboard_tool_calls_total", tool="calculator", outcome="ok") == 1

    # Two replies shown, besides typing notices and streamed pieces.
    assert (
        value(after, "switchboard_deliveries_total", platform="telegram", outcome="delivered") >= 2
    )
    assert value(after, "switchboard_deliveries_total", platform="telegram", outcome="failed") == 0
    assert ("switchboard_queue_depth", frozenset({("queue", "receipts")})) in after
    assert ("switchboard_mailbox_waiting", frozenset()) in after
    assert value(after, "switchboard_mailbox_waiting") == 0
    assert value(after, "switchboard_dead_letters") == 0
    assert ("switchboard_provider_breaker_open", frozenset({("provider", "openai")})) in after
    assert value(after, "switchboard_provider_breaker_open", provider="openai") == 0
    log = served.log
    assert "Traceback" not in log, log
    assert "switchboard serve started; serving telegram; store " in log, log
    assert f"operations endpoints on 127.0.0.1:{port}" in log, log
    turn_lines = [line for line in log.splitlines() if " turn completed: " in line]
    assert len(turn_lines) == 2, log
    fields = re.compile(rf"\[role=serve platform=telegram session=telegram:\w+:{DM} run=\w+\]$")
    for line in turn_lines:
        assert "(telegram, safe-chat) in " in line, line
        assert fields.search(line), line
    assert ", 250+12 tokens, $" in turn_lines[0], turn_lines  # both calls of the tool turn
    assert ", 80+4 tokens, $" in turn_lines[1], turn_lines
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert all("stopping: finishing the work in progress" in line for line in warnings), log


async def test_status_where_there_is_no_data_says_so_and_creates_none(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "REDIS_"))}
    env["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "elsewhere")

    code, shown = await status(env, tmp_path)

    assert code == 1, shown
    assert shown.strip().splitlines() == [
        f"switchboard: error: no data folder at {tmp_path / 'elsewhere'}: check "
        "SWITCHBOARD_DATA_DIR, or start with `switchboard chat` (or `switchboard serve`), "
        "which make it"
    ]
    assert not (tmp_path / "elsewhere").exists()


async def test_an_unreachable_platform_is_retried_while_the_others_answer(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    fake_openai.script(Text("Still here.", input_tokens=10, output_tokens=3))
    port = free_port()
    env = dict(_env(fake, fake_openai, tmp_path, port))
    env.update(
        SLACK_BOT_TOKEN="xoxb-1111111111-2222222222-FakeBotTokenForTestsOnly",
        SLACK_SIGNING_SECRET="slack-signing-secret-for-tests",
        SLACK_PORT=str(free_port()),
        # Nothing listens there: Slack's Web API is unreachable.
        SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/",
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        await served.logged("slack stopped (cannot reach the Slack Web API")
        fake.private_text(DM, "are you there?")
        await reply_containing(fake, DM, "Still here.")

        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/readyz", headers=headers) as response,
        ):
            assert response.status == 503
            checks = (await response.json())["checks"]
        assert checks["slack connection"].startswith("cannot reach the Slack Web API"), checks
        assert checks["telegram intake"] == "ok", checks
        assert served.process.returncode is None
        assert await served.terminate(5.0) == 0
    assert "trying again in" in served.log
    assert "Traceback" not in served.log, served.log
