"""`/stop` and the Stop button on Telegram: python-telegram-bot against the Bot API fake.

While an answer streams its message carries a Stop button; `/stop` or a press stops the turn,
the message is edited to keep what was said with a line saying it was stopped (the button
gone), nothing more is streamed, and the next message is answered as usual. `/stop` with
nothing running says so; in a group, only the asker or an admin may stop an answer.
"""

from __future__ import annotations

from typing import Any

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.stopping import NOT_YOURS, NOTHING_TO_STOP, STOP_BUTTON, STOPPED
from tests.fakes.telegram_api import FakeTelegram, SentMessage
from tests.integration.stopping import OPENING, EndlessProvider
from tests.integration.telegram_helpers import reply_containing, serving, until

DM = 555
GROUP = -100321
ADMIN = 9


def stop_buttons(message: SentMessage) -> list[tuple[str, str]]:
    markup: Any = message.reply_markup
    if not isinstance(markup, dict):
        return []
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def streaming(fake: FakeTelegram, chat_id: int) -> SentMessage:
    """The answer being written, once it shows its opening with the Stop button."""
    message = await reply_containing(fake, chat_id, OPENING)
    await until(fake, lambda: stop_buttons(message) == [("Stop", STOP_BUTTON)], "the Stop button")
    return message


async def stopped(fake: FakeTelegram, message: SentMessage, provider: EndlessProvider) -> None:
    """The answer ended as stopped: its text kept, a last line saying so, no button."""
    await until(fake, lambda: "— stopped" in message.text, "the stopped line")
    assert message.text.startswith(OPENING)
    assert message.reply_markup is None
    assert provider.cancelled.is_set()


async def test_stop_during_an_answer_stops_it_and_the_next_message_is_answered(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = EndlessProvider()
    async with serving(fake, store, provider):
        assert "stop" in [c["command"] for c in fake.commands]
        fake.private_text(DM, "tell me a long story")
        answer = await streaming(fake, DM)

        fake.private_text(DM, "/stop")

        await stopped(fake, answer, provider)
        await reply_containing(fake, DM, STOPPED)
        edits = answer.edits
        fake.private_text(DM, "and now?")
        await reply_containing(fake, DM, "You said: and now?")
    assert answer.edits == edits  # nothing more was streamed into the stopped answer
    assert provider.calls == 2


async def test_the_stop_button_stops_the_answer(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = EndlessProvider()
    async with serving(fake, store, provider):
        fake.private_text(DM, "tell me a long story")
        answer = await streaming(fake, DM)

        press = fake.press_button(DM, answer.message_id, STOP_BUTTON)

        await stopped(fake, answer, provider)
        await until(
            fake,
            lambda: press["callback_query"]["id"] in fake.answered_callbacks,
            "answerCallbackQuery",
        )
        fake.private_text(DM, "and now?")
        await reply_containing(fake, DM, "You said: and now?")
    # The press is answered by the stopped message itself: no extra message for it.
    assert fake.sent_texts(DM) == [answer.text, "You said: and now?"]


async def test_stop_with_nothing_running_says_so(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, EndlessProvider()):
        fake.private_text(DM, "/stop")
        await reply_containing(fake, DM, NOTHING_TO_STOP)
    assert fake.sent_texts(DM) == [NOTHING_TO_STOP]


async def test_a_stranger_in_a_group_cannot_stop_anothers_answer_an_admin_can(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = EndlessProvider()
    policy = ChannelPolicy(admins=frozenset({f"telegram:{ADMIN}"}))
    async with serving(fake, store, provider, policy=policy):
        fake.group_text(GROUP, "tell me a long story", user_id=1, mention=True)
        answer = await streaming(fake, GROUP)

        fake.group_text(GROUP, "/stop", user_id=2, command=True, mention=True)
        fake.press_button(GROUP, answer.message_id, STOP_BUTTON, user_id=3)
        await until(
            fake,
            lambda: fake.sent_texts(GROUP).count(NOT_YOURS) == 2,
            "two refusals",
        )
        assert not provider.cancelled.is_set()
        assert stop_buttons(answer) == [("Stop", STOP_BUTTON)]

        fake.press_button(GROUP, answer.message_id, STOP_BUTTON, user_id=ADMIN)
        await stopped(fake, answer, provider)
