"""A Slack message whose send reached Slack but whose id was never recorded is not sent again.

Every message of a reply carries Slack message metadata naming the reply and the message's
place in it; a show that finds a send noted but not recorded (the gateway died after Slack took
the message, or Slack's answer was lost) looks the message up in the conversation
(`include_all_metadata`) and continues in it. The fake takes the first `chat.postMessage` and
loses its answer, as a gateway killed between Slack's 200 and the reply record sees it.
"""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from channels.slack.adapter import SlackAdapter, SlackSettings
from core.envelopes import Address, Outbound
from core.errors import ChannelError
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import DM_CHANNEL, GENERAL, TEAM_ID
from tests.integration.serving import COMMANDS, local_replies


def _adapter(fake: FakeSlack) -> SlackAdapter:
    settings = SlackSettings(
        bot_token=SecretStr(fake.bot_token),
        signing_secret=SecretStr(fake.signing_secret),
        api_url=fake.api_url,
    )
    return SlackAdapter(settings, menu=COMMANDS.menu(), replies=local_replies())


@pytest.mark.parametrize(
    ("channel", "thread"), [(GENERAL, "1700000000.000001"), (DM_CHANNEL, None)]
)
async def test_a_message_slack_took_is_not_sent_again_when_its_answer_was_lost(
    fake_slack: FakeSlack, channel: str, thread: str | None
) -> None:
    fake = fake_slack
    adapter = _adapter(fake)
    address = Address(platform="slack", bot=TEAM_ID, chat=channel, thread=thread)
    piece = Outbound(kind="delta", address=address, text="The answer so", reply_key="q1", seq=1)
    final = Outbound(kind="reply", address=address, text="The answer so far.", reply_key="q1")

    fake.lose_next_answer("chat.postMessage")
    with pytest.raises(ChannelError):
        await adapter.deliver(piece)
    assert fake.sent_texts(channel) == ["The answer so"]  # Slack took it

    await adapter.deliver(final)

    assert fake.sent_texts(channel) == ["The answer so far."]  # found and edited, not re-sent
    [sent] = fake.sent(channel)
    assert sent.thread_ts == thread
    assert sent.metadata == {
        "event_type": "switchboard_reply",
        "event_payload": {"reply": "q1", "part": 0},
    }
    assert len(fake.calls_to("chat.postMessage")) == 1


async def test_a_send_that_never_reached_slack_is_made_again(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    adapter = _adapter(fake)
    address = Address(platform="slack", bot=TEAM_ID, chat=GENERAL, thread="1700000000.000001")
    reply = Outbound(kind="reply", address=address, text="Hello.", reply_key="q2")

    fake.fail_next("chat.postMessage", error="internal_error", status=500, retry_after=None)
    with pytest.raises(ChannelError):
        await adapter.deliver(reply)
    await adapter.deliver(reply)

    assert fake.sent_texts(GENERAL) == ["Hello."]
    assert len(fake.calls_to("conversations.replies")) == 1  # looked, found nothing, sent
