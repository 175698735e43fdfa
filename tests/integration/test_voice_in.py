"""Voice notes and audio files sent on Telegram, Slack and Discord are downloaded from the
protocol fakes through the platforms' client libraries, transcribed by the OpenAI fake's
`/v1/audio/transcriptions` through the official SDK, and reach the model as the person's words;
with no transcription set up, or when it fails, the model is asked to say so in one sentence."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import SecretStr

from channels.attachments import VOICE_NOTE, DocumentReader, VoiceNotes
from core.backends.sql.store import SqlStore
from core.messages import Message
from core.providers.scripted import ScriptedProvider, text_reply
from core.store.ledger import CostEntry
from core.voice import OpenAITranscriber, TranscriptionFailed, VoiceSettings
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.llm_script import Error, Stall
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import DM_CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration import discord_helpers, slack_helpers, telegram_helpers

DM = 555
OGG = b"OggS\x00\x02" + bytes(range(200))
SPOKEN = "Remind me to water the plants at six."
NOT_SET_UP = "Voice notes are not set up for this bot"
FAILED = "I could not transcribe"

Case = Literal["transcribed", "not set up", "failed"]
CASES: list[Case] = ["transcribed", "not set up", "failed"]


def reader(fake_openai: FakeOpenAI, case: Case) -> DocumentReader:
    """The adapters' reader for `case`: the OpenAI fake transcribes, fails, or is not there."""
    if case == "not set up":
        return DocumentReader(voice=VoiceNotes(VoiceSettings(), None))
    fake_openai.transcribe(SPOKEN if case == "transcribed" else Error(400, "invalid_request"))
    transcriber = OpenAITranscriber(
        api_key=SecretStr(TEST_API_KEY),
        base_url=fake_openai.url,
        model="whisper-1",
        timeout=10,
    )
    return DocumentReader(voice=VoiceNotes(VoiceSettings(), transcriber))


def check(text: str, case: Case, fake_openai: FakeOpenAI) -> None:
    """The model's user message for `case`, and what reached the transcription endpoint."""
    if case == "transcribed":
        assert text == VOICE_NOTE + SPOKEN
    elif case == "not set up":
        assert text.startswith("[A voice note or audio file came with this message")
        assert NOT_SET_UP in text
        assert fake_openai.transcriptions == []
    else:
        assert f'"{FAILED}' in text
        assert SPOKEN not in text
    if case != "not set up":
        [sent] = fake_openai.transcriptions
        assert (sent.model, sent.data, sent.api_key) == ("whisper-1", OGG, TEST_API_KEY)


async def voice_charges(store: SqlStore) -> list[CostEntry]:
    """The ledger's transcription entries, of every session."""
    found: list[CostEntry] = []
    for session in await store.list_sessions():
        found += [e for e in await store.cost_entries(session.id) if e.provider == "voice"]
    return found


async def check_charged(store: SqlStore, case: Case, seconds: float, platform: str) -> None:
    """A transcription is charged per minute to the person and chat; nothing else is."""
    charged = await voice_charges(store)
    if case != "transcribed":
        assert charged == []  # failed or not asked: nothing to charge
        return
    [entry] = charged
    assert (entry.model, entry.usage.input_tokens) == ("whisper-1", 0)
    assert entry.cost_usd == pytest.approx(seconds / 60 * 0.006)
    assert entry.user is not None and entry.user.startswith(f"{platform}:")
    assert entry.chat is not None and entry.chat.startswith(f"{platform}:")


def last_user_text(provider: ScriptedProvider) -> str:
    message: Message = provider.requests[-1].messages[-1]
    return message.text


@pytest.mark.parametrize("case", CASES)
async def test_a_telegram_voice_note(
    case: Case, fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.add_file("voice-1", OGG, "voice/file_1.oga")
    provider = ScriptedProvider([text_reply("Noted.")])
    async with telegram_helpers.serving(fake, store, provider, documents=reader(fake_openai, case)):
        fake.voice(DM, "voice-1", duration=4)
        await telegram_helpers.reply_containing(fake, DM, "Noted.")

    check(last_user_text(provider), case, fake_openai)
    await check_charged(store, case, 4, "telegram")
    if case != "not set up":
        assert fake_openai.transcriptions[0].filename == "voice-note.ogg"
        assert fake.downloads == ["voice/file_1.oga"]


async def test_a_telegram_voice_note_too_long_is_not_downloaded(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.add_file("voice-2", OGG, "voice/file_2.oga")
    provider = ScriptedProvider([text_reply("Too long.")])
    documents = reader(fake_openai, "transcribed")
    async with telegram_helpers.serving(fake, store, provider, documents=documents):
        fake.voice(DM, "voice-2", duration=301)
        await telegram_helpers.reply_containing(fake, DM, "Too long.")

    text = last_user_text(provider)
    assert "is too long for me to listen to (the limit is 5 minutes)." in text
    assert fake.downloads == []
    assert fake_openai.transcriptions == []


async def test_a_telegram_audio_file_with_a_caption(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.add_file("audio-1", OGG, "music/file_1.mp3")
    provider = ScriptedProvider([text_reply("Plants, six.")])
    documents = reader(fake_openai, "transcribed")
    async with telegram_helpers.serving(fake, store, provider, documents=documents):
        fake.audio(DM, "audio-1", file_name="memo.mp3", caption="from the car")
        await telegram_helpers.reply_containing(fake, DM, "Plants, six.")

    assert last_user_text(provider) == f"from the car\n\n{VOICE_NOTE}{SPOKEN}"
    [sent] = fake_openai.transcriptions
    assert (sent.filename, sent.content_type) == ("memo.mp3", "audio/mpeg")


@pytest.mark.parametrize("case", CASES)
async def test_a_slack_audio_file(
    case: Case, fake_slack: FakeSlack, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    fake = fake_slack
    file = fake.add_file("F0AUD", OGG, mimetype="audio/ogg", name="memo.ogg")
    file["duration_ms"] = 4_000
    provider = ScriptedProvider([text_reply("Noted.")])
    documents = reader(fake_openai, case)
    async with slack_helpers.serving(fake, store, provider, documents=documents) as bot:
        await bot.send(fake.dm("", files=[file]))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "Noted.")

    check(last_user_text(provider), case, fake_openai)
    await check_charged(store, case, 4, "slack")
    expected = [] if case == "not set up" else [("F0AUD", True)]
    assert fake.downloads == expected


@pytest.mark.parametrize("case", CASES)
async def test_a_discord_voice_message(
    case: Case, fake_discord: FakeDiscord, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    fake = fake_discord
    attachment = fake.add_attachment(OGG, filename="voice-message.ogg", content_type="audio/ogg")
    attachment |= {"duration_secs": 4.2, "waveform": "AAAA"}
    provider = ScriptedProvider([text_reply("Noted.")])
    async with discord_helpers.serving(fake, store, provider, documents=reader(fake_openai, case)):
        fake.post(CHANNEL, "", mention=True, attachments=[attachment])
        await discord_helpers.reply_containing(fake, CHANNEL, "Noted.")

    check(last_user_text(provider), case, fake_openai)
    await check_charged(store, case, 4.2, "discord")
    downloads = [] if case == "not set up" else [attachment["url"].split("/", 3)[3]]
    assert fake.downloads == downloads


# --- the transcription client ----------------------------------------------------------------


def transcriber(url: str, *, key: str = TEST_API_KEY, timeout: float = 10) -> OpenAITranscriber:
    return OpenAITranscriber(
        api_key=SecretStr(key), base_url=url, model="whisper-1", timeout=timeout
    )


async def test_the_sdk_sends_the_recording_as_a_multipart_upload(fake_openai: FakeOpenAI) -> None:
    fake_openai.transcribe("Hello.")
    words = await transcriber(fake_openai.url).transcribe("file_7.oga", "audio/ogg", OGG)
    assert words == "Hello."
    [sent] = fake_openai.transcriptions
    assert (sent.model, sent.filename, sent.content_type, sent.data) == (
        "whisper-1",
        "file_7.ogg",
        "audio/ogg",
        OGG,
    )


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        ([Error(500, "server_error"), Error(503, "server_error")], "answered HTTP 503"),
        ([Error(400, "invalid_request_error")], "answered HTTP 400"),
        ([Stall(30), Stall(30)], "timed out"),
    ],
)
async def test_a_failure_is_one_line_without_the_key(
    fake_openai: FakeOpenAI, answers: list[Error | Stall], said: str
) -> None:
    fake_openai.transcribe(*answers)
    with pytest.raises(TranscriptionFailed) as failed:
        await transcriber(fake_openai.url, timeout=0.5).transcribe("a.ogg", "audio/ogg", OGG)
    assert said in str(failed.value)
    assert TEST_API_KEY not in str(failed.value) and "\n" not in str(failed.value)
    # A failed request is tried once more, then the person is told.
    assert len(fake_openai.transcriptions) == len(answers)


async def test_a_wrong_key_or_no_server_is_one_line(fake_openai: FakeOpenAI) -> None:
    wrong = "sk-wrong-key-Zq8Wm3Tx7Lp2"
    with pytest.raises(TranscriptionFailed, match="HTTP 401") as failed:
        await transcriber(fake_openai.url, key=wrong).transcribe("a.ogg", "audio/ogg", OGG)
    assert wrong not in str(failed.value)
    url = fake_openai.url
    await fake_openai.close()
    with pytest.raises(TranscriptionFailed, match="could not reach the transcription endpoint"):
        await transcriber(url).transcribe("a.ogg", "audio/ogg", OGG)


async def test_slack_and_discord_say_how_long_a_recording_is(
    fake_slack: FakeSlack, fake_discord: FakeDiscord, fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    too_long = "is too long for me to listen to (the limit is 5 minutes)."
    file = fake_slack.add_file("F0LONG", OGG, mimetype="audio/webm", name="clip.webm")
    file["duration_ms"] = 301_000
    provider = ScriptedProvider([text_reply("Too long."), text_reply("Too long too.")])
    documents = reader(fake_openai, "transcribed")
    async with slack_helpers.serving(fake_slack, store, provider, documents=documents) as bot:
        await bot.send(fake_slack.dm("", files=[file]))
        await slack_helpers.reply_containing(fake_slack, DM_CHANNEL, "Too long.")
    assert too_long in last_user_text(provider)

    attachment = fake_discord.add_attachment(
        OGG, filename="voice-message.ogg", content_type="audio/ogg"
    )
    attachment |= {"duration_secs": 300.5, "waveform": "AAAA"}
    async with discord_helpers.serving(fake_discord, store, provider, documents=documents):
        fake_discord.post(CHANNEL, "", mention=True, attachments=[attachment])
        await discord_helpers.reply_containing(fake_discord, CHANNEL, "Too long too.")
    assert too_long in last_user_text(provider)
    assert fake_slack.downloads == []
    assert fake_discord.downloads == []
    assert fake_openai.transcriptions == []
