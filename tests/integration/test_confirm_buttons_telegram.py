"""Confirmation buttons on Telegram: python-telegram-bot against the Bot API fake.

The question comes with an inline keyboard; a press arrives as a `callback_query`, is answered
(`answerCallbackQuery`) and reaches the waiting turn; the question's message is then edited to
show the decision, without the keyboard. A typed yes still answers, a press by someone else
does not, and silence is a refusal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import SecretStr

from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from tests.confirming import script, wipe_tool
from tests.fakes.telegram_api import FakeTelegram, SentMessage
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot
from tests.integration.telegram_helpers import reply_containing, until

DM = 555
GROUP = -100777
# Only admins are asked to confirm a privileged tool (docs/access.md): the askers are.
ADMINS = frozenset({f"telegram:{DM}", "telegram:1"})


@asynccontextmanager
async def bot(
    fake: FakeTelegram, store: SqlStore, ran: list[str], *, wait: float = PATIENCE
) -> AsyncIterator[None]:
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    async with running_bot(
        adapter,
        store,
        ScriptedProvider(script()),
        ready=lambda: fake.wait_idle_poll(timeout=PATIENCE),
        policy=ChannelPolicy(modes={"telegram": "full"}, admins=ADMINS),
        tools=[wipe_tool(ran)],
        confirm_timeout=wait,
    ):
        yield


def buttons(message: SentMessage) -> list[tuple[str, str]]:
    markup: Any = message.reply_markup
    assert isinstance(markup, dict), f"no keyboard on {message.text!r}"
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def decided(fake: FakeTelegram, chat_id: int, question: SentMessage, line: str) -> None:
    await until(fake, lambda: line in question.text, f"the decision {line!r}")
    assert question.reply_markup is None  # the buttons are gone
    assert question.text.startswith("I'd like to run wipe(path=")


async def test_the_allow_button_lets_the_tool_run_and_the_question_shows_it(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    ran: list[str] = []
    async with bot(fake_telegram, store, ran):
        fake_telegram.private_text(DM, "wipe it")
        question = await reply_containing(fake_telegram, DM, "I'd like to run")
        (allow_label, allow), (refuse_label, _) = buttons(question)
        assert (allow_label, refuse_label) == ("Allow", "Refuse")

        press = fake_telegram.press_button(DM, question.message_id, allow)

        await reply_containing(fake_telegram, DM, "Finished.")
        await decided(fake_telegram, DM, question, "Allowed by User555.")
        await until(
            fake_telegram,
            lambda: press["callback_query"]["id"] in fake_telegram.answered_callbacks,
            "answerCallbackQuery",
        )
    assert ran == ["/tmp/x"]
    assert "callback_query" in (fake_telegram.allowed_updates or [])


async def test_a_typed_yes_still_answers_and_takes_the_buttons_away(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    ran: list[str] = []
    async with bot(fake_telegram, store, ran):
        fake_telegram.private_text(DM, "wipe it")
        question = await reply_containing(fake_telegram, DM, "I'd like to run")

        fake_telegram.private_text(DM, "yes")

        await reply_containing(fake_telegram, DM, "Finished.")
        await decided(fake_telegram, DM, question, "Allowed by User555.")
    assert ran == ["/tmp/x"]


async def test_only_the_asker_can_press_in_a_group(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    ran: list[str] = []
    async with bot(fake_telegram, store, ran):
        fake_telegram.group_text(GROUP, "wipe it", user_id=1, mention=True)
        question = await reply_containing(fake_telegram, GROUP, "I'd like to run")
        (_, allow), (_, refuse) = buttons(question)

        other = fake_telegram.press_button(GROUP, question.message_id, allow, user_id=2)
        await until(
            fake_telegram,
            lambda: other["callback_query"]["id"] in fake_telegram.answered_callbacks,
            "the other person's press answered",
        )
        fake_telegram.press_button(GROUP, question.message_id, refuse, user_id=1)

        await reply_containing(fake_telegram, GROUP, "Finished.")
        await decided(fake_telegram, GROUP, question, "Refused by User1.")
    assert ran == []


async def test_no_answer_in_time_is_a_refusal_shown_on_the_question(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    ran: list[str] = []
    async with bot(fake_telegram, store, ran, wait=0.2):
        fake_telegram.private_text(DM, "wipe it")
        question = await reply_containing(fake_telegram, DM, "I'd like to run")

        await decided(fake_telegram, DM, question, "No answer within 0.2 s: refused.")
        await reply_containing(fake_telegram, DM, "Finished.")
    assert ran == []
