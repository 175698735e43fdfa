"""`/stop` and the Stop button on Discord: discord.py against the gateway and REST fake.

While an answer streams its message carries a Stop button (a component row); the `/stop`
application command or a press stops the turn: the message is edited to keep what was said
with a line saying it was stopped, its components gone, nothing more is streamed, and the
next message is answered. `/stop` with nothing running says so; in a server channel only the
asker or an admin may stop an answer.
"""

from __future__ import annotations

from typing import Any

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.stopping import NOT_YOURS, NOTHING_TO_STOP, STOP_BUTTON, STOPPED
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.fakes.discord_events import CHANNEL
from tests.integration.discord_helpers import reply_containing, serving
from tests.integration.serving import PATIENCE
from tests.integration.stopping import OPENING, EndlessProvider

ALICE = 42
BOB = 43
ADMIN = 44


def stop_ids(message: SentMessage) -> list[str]:
    return [button["custom_id"] for row in message.components or [] for button in row["components"]]


def as_json(fake: FakeDiscord, message: SentMessage) -> dict[str, Any]:
    found = fake.bot_message(message.channel_id)
    assert found is not None and int(found["id"]) == message.id
    return found


async def streaming(fake: FakeDiscord, channel_id: int) -> SentMessage:
    """The answer being written, once it shows its opening with the Stop button."""
    message = await reply_containing(fake, channel_id, OPENING)
    await fake.until(lambda: stop_ids(message) == [STOP_BUTTON], "the Stop button", PATIENCE)
    return message


async def stopped(fake: FakeDiscord, message: SentMessage, provider: EndlessProvider) -> None:
    await fake.until(lambda: "— stopped" in message.content, "the stopped line", PATIENCE)
    assert message.content.startswith(OPENING)
    assert message.components is None  # the Stop button is gone
    assert provider.cancelled.is_set()


async def test_the_stop_command_during_an_answer_stops_it_and_the_next_message_is_answered(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = EndlessProvider()
    async with serving(fake, store, provider):
        assert "stop" in [c["name"] for c in fake.commands]
        fake.dm(ALICE, "tell me a long story")
        dm = fake.dm_channel_id(ALICE)
        answer = await streaming(fake, dm)

        fake.slash("stop", user_id=ALICE)

        await stopped(fake, answer, provider)
        await reply_containing(fake, dm, STOPPED)
        edits = answer.edits
        fake.dm(ALICE, "and now?")
        await reply_containing(fake, dm, "You said: and now?")
    assert answer.edits == edits  # nothing more was streamed into the stopped answer


async def test_the_stop_button_stops_the_answer(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    provider = EndlessProvider()
    async with serving(fake, store, provider):
        fake.dm(ALICE, "tell me a long story")
        dm = fake.dm_channel_id(ALICE)
        answer = await streaming(fake, dm)

        pressed = fake.press(as_json(fake, answer), STOP_BUTTON, user_id=ALICE)

        await stopped(fake, answer, provider)
        assert int(pressed["id"]) in fake.deferred_updates
        fake.dm(ALICE, "and now?")
        await reply_containing(fake, dm, "You said: and now?")
    assert fake.sent_texts(dm) == [answer.content, "You said: and now?"]


async def test_the_stop_command_with_nothing_running_says_so(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    async with serving(fake, store, EndlessProvider()):
        fake.slash("stop", user_id=ALICE)
        await reply_containing(fake, fake.dm_channel_id(ALICE), NOTHING_TO_STOP)


async def test_someone_else_in_a_channel_cannot_stop_an_answer_an_admin_can(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = EndlessProvider()
    policy = ChannelPolicy(admins=frozenset({f"discord:{ADMIN}"}))
    async with serving(fake, store, provider, policy=policy):
        fake.post(CHANNEL, "tell me a long story", user_id=ALICE, mention=True)
        answer = await streaming(fake, CHANNEL)
        shown = as_json(fake, answer)

        fake.press(shown, STOP_BUTTON, user_id=BOB)
        await reply_containing(fake, CHANNEL, NOT_YOURS)
        assert not provider.cancelled.is_set()
        assert stop_ids(answer) == [STOP_BUTTON]

        fake.press(shown, STOP_BUTTON, user_id=ADMIN)
        await stopped(fake, answer, provider)
