"""A message whose image cannot be read still gets an answer, never silence.

The photo's download fails at the platform's fake (an unknown Telegram file, a Discord
attachment that is gone); the turn runs with a note that tells the model an image was there.
"""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.providers.scripted import ScriptedProvider, text_reply
from tests.fakes import FakeDiscord, FakeTelegram
from tests.fakes.discord_events import CHANNEL
from tests.integration import discord_helpers, telegram_helpers

DM = 555
NOTE = "could not be read (too large, or the download failed)"


def scripted(answer: str) -> ScriptedProvider:
    return ScriptedProvider([text_reply(answer)])


async def test_a_telegram_photo_that_cannot_be_downloaded_is_still_answered(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = scripted("I could not see the picture.")
    async with telegram_helpers.serving(fake, store, provider):
        fake.photo(DM, "no-such-file")  # no caption: the message is the photo alone
        await telegram_helpers.reply_containing(fake, DM, "I could not see the picture.")

    [request] = provider.requests
    asked = request.messages[-1]
    assert asked.images == []
    assert NOTE in asked.text
    assert asked.text.startswith("[An image came with this message")


async def test_a_discord_image_that_cannot_be_downloaded_is_still_answered(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    gone = fake.add_attachment(b"\x89PNG\r\n\x1a\n", filename="gone.png")
    fake.attachments.clear()  # the CDN no longer has it
    provider = scripted("The picture did not come through.")
    async with discord_helpers.serving(fake, store, provider):
        fake.post(CHANNEL, "what is this?", mention=True, attachments=[gone])
        await discord_helpers.reply_containing(fake, CHANNEL, "did not come through")

    [request] = provider.requests
    asked = request.messages[-1]
    assert asked.images == []
    assert asked.text.startswith("what is this?\n\n[An image came with this message")
    assert NOTE in asked.text
