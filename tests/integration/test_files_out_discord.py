"""Files back to a Discord channel: a `file` Outbound through the gateway becomes a message
with an attachment (`discord.File`) on the fake, through discord.py; a file over Discord's
limit, or one Discord refuses, becomes a one-line note."""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Attachment, Outbound
from core.providers.demo import DemoProvider
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.fakes.openai_api import tiny_png
from tests.integration.discord_helpers import reply_containing, serving

PICTURE = Attachment(name="image-1.png", media_type="image/png", data=tiny_png(), image=True)
NOTES = Attachment(name="notes.txt", media_type="text/plain", data=b"milk\neggs\n")


def _file_outbound(*files: Attachment, text: str = "") -> Outbound:
    address = Address.parse(f"discord:{CHANNEL}")
    return Outbound(kind="file", address=address, text=text, attachments=list(files))


async def test_each_file_is_a_message_with_an_attachment_the_first_captioned(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, DemoProvider()) as bot:
        await bot.bus.enqueue(
            outbound_queue("discord"), _file_outbound(PICTURE, NOTES, text="Your list, @everyone")
        )
        await fake.until(lambda: len(fake.uploads) == 2, "two uploads")
    (channel, first_id, picture), (_, second_id, notes) = fake.uploads
    assert channel == CHANNEL
    assert (picture.filename, picture.data) == ("image-1.png", PICTURE.data)
    assert (notes.filename, notes.data) == ("notes.txt", NOTES.data)
    first, second = (m for m in fake.messages[CHANNEL] if m.id in (first_id, second_id))
    assert first.content == "Your list, @everyone"
    assert first.pings == set()  # a caption pings nobody
    assert second.content == ""


async def test_a_file_over_discords_limit_becomes_a_note_without_an_upload(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    big = Attachment(name="video.mp4", media_type="video/mp4", data=b"\0" * (11 * 1024 * 1024))
    fake = fake_discord
    async with serving(fake, store, DemoProvider()) as bot:
        await bot.bus.enqueue(outbound_queue("discord"), _file_outbound(big))
        note = await reply_containing(fake, CHANNEL, "Could not send the file video.mp4")
    assert "this platform takes at most 10.0 MB" in note.content
    assert fake.uploads == []


async def test_a_refused_upload_becomes_a_note(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    fake.fail_next("create_message", status=403, code=50013, message="Missing Permissions")
    async with serving(fake, store, DemoProvider()) as bot:
        await bot.bus.enqueue(outbound_queue("discord"), _file_outbound(NOTES))
        note = await reply_containing(fake, CHANNEL, "Could not send the file notes.txt")
    assert "the platform refused it" in note.content
    assert fake.uploads == []
