"""`switchboard serve` answers a Telegram voice note from its transcript: the process downloads
it from the Bot API fake and has it transcribed by the OpenAI fake's `/v1/audio/transcriptions`,
found through OPENAI_BASE_URL and OPENAI_API_KEY as a user configures them. The demo provider
answers (SWITCHBOARD_PROVIDER=demo), echoing what the model was given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.served import serve
from tests.e2e.test_serve_telegram import START_PATIENCE, STOP_PATIENCE
from tests.e2e.test_serve_telegram import env as telegram_env
from tests.fakes.llm_script import Error
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e

env = telegram_env
DM = 555
KEY = "sk-e2e-voice-Wq4Lz8Rt2Xm6Hc3"
OGG = b"OggS\x00\x02" + bytes(range(200))
SPOKEN = "Please water the plants on Sunday."


@pytest.fixture
async def transcriptions() -> AsyncIterator[FakeOpenAI]:
    """The OpenAI fake, with this test's key."""
    async with FakeOpenAI(api_key=KEY) as fake:
        yield fake


async def test_serve_answers_a_telegram_voice_note_from_its_transcript(
    fake_telegram: FakeTelegram,
    transcriptions: FakeOpenAI,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    env = env | {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": transcriptions.url,
        "SWITCHBOARD_PROVIDER": "demo",
    }
    fake.add_file("voice-1", OGG, "voice/file_1.oga")
    fake.add_file("voice-2", OGG, "voice/file_2.oga")
    transcriptions.transcribe(SPOKEN, Error(500, "server_error"), Error(503, "server_error"))
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.voice(DM, "voice-1", duration=3)
        await reply_containing(fake, DM, f"You said: (voice note) {SPOKEN}")

        # The endpoint fails (and fails again when tried once more): one sentence, not silence.
        fake.voice(DM, "voice-2", duration=3)
        answer = await reply_containing(fake, DM, "I could not transcribe voice-note.ogg")
        assert "please try again or type your message" in answer.text

        assert await served.terminate(STOP_PATIENCE) == 0

    assert fake.downloads == ["voice/file_1.oga", "voice/file_2.oga"]
    assert [t.filename for t in transcriptions.transcriptions] == ["voice-note.ogg"] * 3
    assert "Traceback" not in served.log, served.log
    assert KEY not in served.log
