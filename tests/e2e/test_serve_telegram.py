"""`switchboard serve` as a user runs it, a subprocess, talking to the Telegram Bot API fake.

The fake runs in the test's event loop; the process finds it through TELEGRAM_API_URL. The
demo provider answers (no API key is set), so replies are known in advance.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from core.redact import REDACTED
from tests.documents import pdf_bytes
from tests.e2e.processes import open_profiles
from tests.e2e.served import serve
from tests.fakes import FakeOpenAI, Hold, Text
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import calls_to, reply_containing, until
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")
DM = 555
GROUP = -100123
# Starting the process imports python-telegram-bot and opens the database: allow for a slow
# machine. Only reached when something is broken.
START_PATIENCE = 20.0
STOP_PATIENCE = 5.0
WEBHOOK_SECRET = "e2e-webhook-secret-0123456789"


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
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        SWITCHBOARD_LOG_LEVEL="debug,libraries=debug",
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_URL=fake_telegram.url,
    )
    return keep


def answer_with(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    """Point `env` at the OpenAI fake, its default model gpt-4o-mini."""
    env.update(
        SWITCHBOARD_PROVIDER="openai",
        SWITCHBOARD_MODEL="gpt-4o-mini",
        OPENAI_API_KEY=fake_openai.api_key,
        OPENAI_BASE_URL=fake_openai.url,
    )


async def test_serve_answers_telegram_by_long_polling(
    fake_telegram: FakeTelegram, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        assert [c["command"] for c in fake.commands] == [
            "new",
            "cost",
            "stop",
            "model",
            "help",
            "schedules",
            "unschedule",
            "compact",
            "fork",
            "sessions",
            "switch",
            "forgetme",
        ]

        fake.private_text(DM, "what is 6*7?")
        answer = await reply_containing(fake, DM, "worked out with the calculator).")
        assert "The answer is 42" in answer.text

        # A group: not addressed, not answered; the mention after it is, and only it.
        fake.group_text(GROUP, "talking among ourselves", user_id=7)
        fake.group_text(GROUP, "hello bot", user_id=7, mention=True)
        await reply_containing(fake, GROUP, "You said: hello bot")
        assert len(fake.sent_texts(GROUP)) == 1

        # The same message twice: one answer (the next message shows the second was handled;
        # sent after the answer, so that it does not join the turn, `busy = "steer"`).
        twice = fake.private_text(DM, "only once please")
        fake.redeliver(twice)
        await reply_containing(fake, DM, "You said: only once please")
        fake.private_text(DM, "next one")
        await reply_containing(fake, DM, "You said: next one")
        assert sum("only once please" in t for t in fake.sent_texts(DM)) == 1

        # Flood control on the reply: it comes late, not never, and once.
        fake.fail_next("sendMessage", retry_after=1)
        fake.private_text(DM, "after the flood")
        await reply_containing(fake, DM, "You said: after the flood")
        assert sum("after the flood" in t for t in fake.sent_texts(DM)) == 1
        assert len(calls_to(fake, "sendMessage", DM)) == len(fake.sent_texts(DM)) + 1

        assert await served.terminate(STOP_PATIENCE) == 0

    log = served.log
    assert "Traceback" not in log, log
    assert "HTTP Request: POST" in log  # httpx's request lines, with the URLs, were logged
    assert REDACTED in log
    assert fake.token not in log


async def test_serve_reads_a_telegram_pdf_to_the_model_scrubbed(
    fake_telegram: FakeTelegram, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    # A secret by its shape only: the answer's scrubber (configured values) would let it
    # through, so seeing it redacted shows the document itself was scrubbed.
    fake.add_file(
        "pdf-1",
        pdf_bytes(["The secret word is marmalade.", "password=PlumTreeBlossom"]),
        "documents/file_1.pdf",
    )
    fake.add_file("zip-1", b"PK\x03\x04", "documents/file_2.zip")
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.document(DM, "pdf-1", file_name="words.pdf", mime_type="application/pdf")
        answer = await reply_containing(fake, DM, "The secret word is marmalade.")
        assert "[The file words.pdf, which the person sent." in answer.text
        assert f"password={REDACTED}" in answer.text
        assert "PlumTreeBlossom" not in answer.text

        fake.document(DM, "zip-1", file_name="photos.zip", mime_type="application/zip")
        await reply_containing(fake, DM, "I cannot read photos.zip")
        assert fake.downloads == ["documents/file_1.pdf"]

        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log


async def test_serve_answers_telegram_through_a_webhook(
    fake_telegram: FakeTelegram, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    env.update(
        TELEGRAM_WEBHOOK_URL=url,
        TELEGRAM_WEBHOOK_SECRET=WEBHOOK_SECRET,
        TELEGRAM_WEBHOOK_PORT=str(port),
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_for_call("setWebhook", timeout=START_PATIENCE))
        assert fake.webhook is not None
        assert (fake.webhook.url, fake.webhook.secret_token) == (url, WEBHOOK_SECRET)

        intruder = fake.private_text(DM, "let me in")
        assert await fake.post_webhook(url, intruder, secret="not-the-secret") == 403
        update = fake.private_text(DM, "hello through the hook")
        assert await fake.post_webhook(url, update, secret=WEBHOOK_SECRET) == 200
        reply = await reply_containing(fake, DM, "You said: hello through the hook")

        assert await served.terminate(STOP_PATIENCE) == 0

    assert fake.sent_texts(DM) == [reply.text]  # nothing for the intruder
    assert calls_to(fake, "getUpdates") == []
    log = served.log
    assert "Traceback" not in log, log
    assert fake.token not in log
    assert WEBHOOK_SECRET not in log


async def test_serve_stops_a_telegram_answer_with_stop(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    """`/stop` during a long answer: the model call is dropped, the answer keeps its text with
    a line saying it was stopped (its Stop button gone), and the next message is answered."""
    fake = fake_telegram
    fake_openai.script(Hold("Once upon a time"), Text("Here is the short version."))
    answer_with(env, fake_openai)
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(DM, "tell me a long story")
        answer = await reply_containing(fake, DM, "Once upon a time")
        await until(fake, lambda: answer.reply_markup is not None, "the Stop button")

        fake.private_text(DM, "/stop")

        await until(fake, lambda: "— stopped" in answer.text, "the stopped answer")
        assert answer.reply_markup is None
        await reply_containing(fake, DM, "Stopped.")
        await asyncio.wait_for(fake_openai.dropped.wait(), START_PATIENCE)
        fake.private_text(DM, "and the short version?")
        await reply_containing(fake, DM, "Here is the short version.")
        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log


async def test_serve_switches_a_telegram_chats_model_and_keeps_it_across_a_restart(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    """`/model NAME` in a DM: the next request names that model, after a restart too;
    `/model reset` goes back to the default."""
    fake = fake_telegram
    profile = tmp_path / "open-profiles" / "default" / "profile.toml"
    with profile.open("a", encoding="utf-8") as toml:
        toml.write('\n[models]\nallowed = [{provider = "openai", model = "gpt-4.1"}]\n')
    fake_openai.script(Text("first"), Text("second"), Text("third"))
    answer_with(env, fake_openai)
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(DM, "/model gpt-4.1")
        await reply_containing(fake, DM, "This chat now uses gpt-4.1 (openai).")
        fake.private_text(DM, "hello")
        await reply_containing(fake, DM, "first")
        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log

    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(DM, "still there?")
        await reply_containing(fake, DM, "second")
        fake.private_text(DM, "/model reset")
        await reply_containing(fake, DM, "back to the default model, gpt-4o-mini")
        fake.private_text(DM, "and now?")
        await reply_containing(fake, DM, "third")
        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log
    assert [r.json["model"] for r in fake_openai.requests] == ["gpt-4.1", "gpt-4.1", "gpt-4o-mini"]
