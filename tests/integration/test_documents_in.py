"""Documents sent on Telegram, Slack and Discord reach the model as fenced, scrubbed text,
downloaded from the protocol fakes through the platforms' client libraries; files the bot
does not read reach it as a note asking it to tell the person why."""

from __future__ import annotations

from channels.attachments import DocumentReader
from core.backends.sql.store import SqlStore
from core.documents import DocumentSettings
from core.messages import Message
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import REDACTED, Redactor
from core.safety import FENCE_CLOSE, FENCE_OPEN
from tests.documents import docx_bytes, pdf_bytes
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import DM_CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration import discord_helpers, slack_helpers, telegram_helpers

DM = 555
SECRET = "configured-secret-Vb7Qx2Lm9Tz4Wk8Hn3"


def scripted(*answers: str) -> ScriptedProvider:
    return ScriptedProvider([text_reply(answer) for answer in answers])


def last_user_message(provider: ScriptedProvider) -> Message:
    return provider.requests[-1].messages[-1]


def fenced(text: str) -> str:
    """What is between the fences of the one document in `text`."""
    return text.split(FENCE_OPEN + "\n", 1)[1].split("\n" + FENCE_CLOSE, 1)[0]


# --- Telegram --------------------------------------------------------------------------------


async def test_a_telegram_pdf_reaches_the_model_fenced_and_cut_to_the_budget(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    pages = ["Quarterly report: revenue up", "Second page text", "Third page text"]
    fake.add_file("doc-1", pdf_bytes(pages), "documents/file_1.pdf")
    provider = scripted("Revenue went up.")
    reader = DocumentReader(DocumentSettings(max_chars=500), Redactor())
    async with telegram_helpers.serving(fake, store, provider, documents=reader):
        fake.document(
            DM, "doc-1", file_name="report.pdf", mime_type="application/pdf", caption="summary?"
        )
        await telegram_helpers.reply_containing(fake, DM, "Revenue went up.")

    text = last_user_message(provider).text
    assert text.startswith("summary?\n\n[The file report.pdf, which the person sent.")
    assert fenced(text) == "\n\n".join(pages)
    assert fake.downloads == ["documents/file_1.pdf"]


async def test_a_telegram_document_too_large_to_download_gets_a_sentence(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.add_file("doc-2", b"small here", "documents/file_2.txt")
    provider = scripted("It is too large.")
    async with telegram_helpers.serving(fake, store, provider):
        # The Bot API lets bots download 20 MB at most.
        fake.document(
            DM, "doc-2", file_name="huge.txt", mime_type="text/plain", file_size=21 * 2**20
        )
        await telegram_helpers.reply_containing(fake, DM, "It is too large.")

    text = last_user_message(provider).text
    assert '"huge.txt is too large for me to read (the limit is 20 MB)."' in text
    assert fake.downloads == []


async def test_a_telegram_archive_is_not_downloaded_and_the_model_is_asked_to_say_so(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.add_file("doc-3", b"PK\x03\x04", "documents/file_3.zip")
    provider = scripted("I cannot open archives.")
    async with telegram_helpers.serving(fake, store, provider):
        fake.document(DM, "doc-3", file_name="photos.zip", mime_type="application/zip")
        await telegram_helpers.reply_containing(fake, DM, "I cannot open archives.")

    text = last_user_message(provider).text
    assert text.startswith("[A file came with this message but was not read.")
    assert "I cannot read photos.zip" in text
    assert fake.downloads == []


# --- Slack -----------------------------------------------------------------------------------


async def test_a_slack_word_document_reaches_the_model_scrubbed(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    data = docx_bytes(["Deploy notes", f"password: {SECRET}"], [["host", "port"], ["db", "5432"]])
    file = fake.add_file(
        "F0DOC",
        data,
        mimetype="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        name="deploy.docx",
    )
    provider = scripted("Read it.")
    reader = DocumentReader(redactor=Redactor([SECRET]))
    async with slack_helpers.serving(fake, store, provider, documents=reader) as bot:
        await bot.send(fake.dm("what does this say?", files=[file]))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "Read it.")

    text = last_user_message(provider).text
    assert text.startswith("what does this say?\n\n[The file deploy.docx, which the person sent.")
    assert fenced(text) == f"Deploy notes\npassword: {REDACTED}\nhost | port\ndb | 5432"
    assert SECRET not in text
    assert fake.downloads == [("F0DOC", True)]


async def test_a_slack_csv_and_an_image_arrive_together(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    image = fake.add_file("F0IMG", png, mimetype="image/png", name="chart.png")
    table = fake.add_file("F0CSV", b"month,sales\nmay,10\n", mimetype="text/csv", name="s.csv")
    provider = scripted("Ten in May.")
    async with slack_helpers.serving(fake, store, provider) as bot:
        await bot.send(fake.dm("sales?", files=[image, table]))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "Ten in May.")

    message = last_user_message(provider)
    assert [i.data for i in message.images] == [png]
    assert fenced(message.text) == "month,sales\nmay,10\n"
    assert sorted(fake.downloads) == [("F0CSV", True), ("F0IMG", True)]


# --- Discord ---------------------------------------------------------------------------------


async def test_discord_attachments_become_text_and_notes(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    notes = fake.add_attachment(
        b"# Plan\n\n- ship", filename="plan.md", content_type="text/markdown; charset=utf-8"
    )
    broken = fake.add_attachment(
        b"%PDF-1.7 broken", filename="x.pdf", content_type="application/pdf"
    )
    program = fake.add_attachment(
        b"MZ", filename="setup.exe", content_type="application/x-msdownload"
    )
    provider = scripted("One plan, one broken file.")
    async with discord_helpers.serving(fake, store, provider):
        fake.post(CHANNEL, "look", mention=True, attachments=[notes, broken, program])
        await discord_helpers.reply_containing(fake, CHANNEL, "One plan, one broken file.")

    text = last_user_message(provider).text
    assert fenced(text) == "# Plan\n\n- ship"
    assert '"x.pdf is damaged or not a PDF I can read."' in text
    assert '"I cannot read setup.exe: I read PDF' in text
    assert sorted(fake.downloads) == sorted(a["url"].split("/", 3)[3] for a in (notes, broken))


async def test_a_telegram_image_sent_as_a_file_reaches_the_model_as_an_image(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    fake.add_file("doc-4", png, "documents/file_4.png")
    provider = scripted("A screenshot.")
    async with telegram_helpers.serving(fake, store, provider):
        fake.document(DM, "doc-4", file_name="shot.png", mime_type="image/png", caption="this?")
        await telegram_helpers.reply_containing(fake, DM, "A screenshot.")

    message = last_user_message(provider)
    assert message.text == "this?"
    assert [(i.media_type, i.data) for i in message.images] == [("image/png", png)]
