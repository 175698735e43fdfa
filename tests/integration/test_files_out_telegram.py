"""Files back to a Telegram chat: a `file` Outbound through the gateway becomes `sendPhoto`
(a picture) or `sendDocument` on the Bot API fake, through python-telegram-bot; a refused
upload becomes a one-line note."""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Attachment, Outbound
from core.providers.demo import DemoProvider
from tests.documents import pdf_bytes
from tests.fakes.openai_api import tiny_png
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import BOT_KEY, reply_containing, serving, until

DM = 555
FORUM = -100777


def _file_outbound(
    chat: int, *files: Attachment, text: str = "", thread: str | None = None
) -> Outbound:
    address = Address(platform="telegram", bot=BOT_KEY, chat=str(chat), thread=thread)
    return Outbound(kind="file", address=address, text=text, attachments=list(files))


PICTURE = Attachment(name="image-1.png", media_type="image/png", data=tiny_png(), image=True)
REPORT = Attachment(name="report.pdf", media_type="application/pdf", data=pdf_bytes(["Q3 figures"]))


async def test_a_picture_goes_up_as_a_photo_and_a_file_as_a_document(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()) as s:
        await s.bus.enqueue(
            outbound_queue("telegram"), _file_outbound(DM, PICTURE, REPORT, text="Here you go")
        )
        await until(fake, lambda: len(fake.uploads) == 2, "two uploads")
    photo, document = fake.uploads
    assert (photo.method, photo.chat_id, photo.caption) == ("sendPhoto", DM, "Here you go")
    assert photo.file.data == PICTURE.data
    assert (document.method, document.caption) == ("sendDocument", None)
    assert (document.file.filename, document.file.data) == ("report.pdf", REPORT.data)


async def test_a_file_for_a_forum_topic_goes_to_that_topic(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()) as s:
        await s.bus.enqueue(outbound_queue("telegram"), _file_outbound(FORUM, REPORT, thread="7"))
        await until(fake, lambda: bool(fake.uploads), "an upload")
    upload = fake.uploads[0]
    assert upload.chat_id == FORUM
    assert fake.messages[FORUM][-1].thread_id == 7


async def test_a_refused_upload_becomes_a_note_in_the_chat(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.fail_next("sendDocument", error_code=400, description="Bad Request: file is too big",
                   retry_after=None)  # fmt: skip
    async with serving(fake, store, DemoProvider()) as s:
        await s.bus.enqueue(outbound_queue("telegram"), _file_outbound(DM, REPORT))
        note = await reply_containing(fake, DM, "Could not send the file report.pdf")
    assert "the platform refused it" in note.text
    assert fake.uploads == []


async def test_a_picture_over_the_photo_limit_goes_as_a_document(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    # 10 MB is the Bot API's photo limit; a bigger picture is still sent, as a file.
    big = Attachment(
        name="poster.png",
        media_type="image/png",
        data=tiny_png() + b"\0" * (10 * 1000 * 1000),
        image=True,
    )
    fake = fake_telegram
    async with serving(fake, store, DemoProvider()) as s:
        await s.bus.enqueue(outbound_queue("telegram"), _file_outbound(DM, big))
        await until(fake, lambda: bool(fake.uploads), "an upload")
    assert fake.uploads[0].method == "sendDocument"
    assert len(fake.uploads[0].file.data) == big.size
