"""`/stop` and the Stop button on Slack: slack-bolt against the Web API fake.

While an answer streams its message carries a Stop button (a Block Kit `actions` block); `!stop`
typed in the conversation, or a press, stops the turn: the message is updated to keep what was
said with a line saying it was stopped, its blocks gone, nothing more is streamed, and the next
message is answered. `/stop` with nothing running says so; in a channel only the asker or an
admin may stop an answer.
"""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.stopping import NOT_YOURS, NOTHING_TO_STOP, STOP_BUTTON, STOPPED
from tests.fakes.slack_api import FakeSlack, SentMessage
from tests.fakes.slack_events import ALICE, BOB, DM_CHANNEL, GENERAL
from tests.integration.serving import PATIENCE
from tests.integration.slack_helpers import Serving, reply_containing, serving
from tests.integration.stopping import OPENING, EndlessProvider

ADMIN = "U0ADMIN"


def stop_values(message: SentMessage) -> list[str]:
    return [
        element["value"]
        for block in message.blocks or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]


async def streaming(fake: FakeSlack, channel: str) -> SentMessage:
    """The answer being written, once it shows its opening with the Stop button."""
    message = await reply_containing(fake, channel, OPENING)
    await fake.until(lambda: stop_values(message) == [STOP_BUTTON], "the Stop button", PATIENCE)
    return message


async def stopped(fake: FakeSlack, message: SentMessage, provider: EndlessProvider) -> None:
    await fake.until(lambda: "— stopped" in message.text, "the stopped line", PATIENCE)
    assert message.text.startswith(OPENING)
    assert not message.blocks  # the Stop button is gone
    assert provider.cancelled.is_set()


async def press(bot: Serving, message: SentMessage, user: str) -> None:
    payload = bot.fake.block_actions(message, STOP_BUTTON, user=user)
    status, text = await bot.fake.post_interaction(bot.events_url, payload)
    assert status == 200, (status, text)


async def test_stop_typed_during_an_answer_stops_it_and_the_next_message_is_answered(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = EndlessProvider()
    async with serving(fake, store, provider) as bot:
        await bot.send(fake.dm("tell me a long story"))
        answer = await streaming(fake, DM_CHANNEL)

        await bot.send(fake.dm("!stop"))

        await stopped(fake, answer, provider)
        await reply_containing(fake, DM_CHANNEL, STOPPED)
        edits = answer.edits
        await bot.send(fake.dm("and now?"))
        await reply_containing(fake, DM_CHANNEL, "You said: and now?")
    assert answer.edits == edits  # nothing more was streamed into the stopped answer


async def test_the_stop_button_stops_the_answer(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    provider = EndlessProvider()
    async with serving(fake, store, provider) as bot:
        await bot.send(fake.dm("tell me a long story"))
        answer = await streaming(fake, DM_CHANNEL)

        await press(bot, answer, ALICE)

        await stopped(fake, answer, provider)
        await bot.send(fake.dm("and now?"))
        await reply_containing(fake, DM_CHANNEL, "You said: and now?")
    assert [m.text for m in fake.messages[DM_CHANNEL]] == [answer.text, "You said: and now?"]


async def test_the_stop_slash_command_with_nothing_running_says_so(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, EndlessProvider()) as bot:
        await bot.command(fake.slash_command("/stop"))
        await reply_containing(fake, DM_CHANNEL, NOTHING_TO_STOP)


async def test_someone_else_in_a_channel_cannot_stop_an_answer_an_admin_can(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = EndlessProvider()
    policy = ChannelPolicy(admins=frozenset({f"slack:{ADMIN}"}))
    async with serving(fake, store, provider, policy=policy) as bot:
        asked = fake.channel_message("tell me a long story", mention=True)
        await bot.send(asked)
        answer = await streaming(fake, GENERAL)
        thread = answer.thread_ts
        assert thread is not None

        await bot.send(fake.channel_message("!stop", user=BOB, thread_ts=thread))
        await press(bot, answer, BOB)
        await fake.until(
            lambda: [m.text for m in fake.messages[GENERAL]].count(NOT_YOURS) == 2,
            "two refusals",
            PATIENCE,
        )
        assert not provider.cancelled.is_set()
        assert stop_values(answer) == [STOP_BUTTON]

        await press(bot, answer, ADMIN)
        await stopped(fake, answer, provider)
