"""`/forgetme` on Telegram: python-telegram-bot against the Bot API fake.

In a DM the bot asks once (the confirmation gate's Allow and Refuse buttons); Refuse keeps
everything, Allow erases the person's data (`core/store/people.py`). In a group it erases
nothing and says to ask in a DM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import SecretStr

from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.sql.store import SqlStore
from core.providers.demo import DemoProvider
from core.store.people import TOMBSTONE, Person
from tests.fakes.telegram_api import FakeTelegram, SentMessage
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot
from tests.integration.telegram_helpers import reply_containing, until

ANN = 555
OTHER_DM = 9555
BOB = 7
GROUP = -100777


@asynccontextmanager
async def bot(fake: FakeTelegram, store: SqlStore) -> AsyncIterator[None]:
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    async with running_bot(
        adapter,
        store,
        DemoProvider(),
        ready=lambda: fake.wait_idle_poll(timeout=PATIENCE),
        confirm_timeout=PATIENCE,
    ):
        yield


def button(message: SentMessage, label: str) -> str:
    markup: Any = message.reply_markup
    assert isinstance(markup, dict), f"no keyboard on {message.text!r}"
    [data] = [
        b["callback_data"] for row in markup["inline_keyboard"] for b in row if b["text"] == label
    ]
    return str(data)


def questions(fake: FakeTelegram) -> list[SentMessage]:
    return [m for m in fake.messages.get(ANN, []) if "forget_me(" in m.text]


async def test_forgetme_asks_once_in_a_dm_and_erases_only_when_allowed(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    ann = Person(platform="telegram", user_id=str(ANN))
    async with bot(fake, store):
        fake.private_text(ANN, "my zanzibarflamingo")
        await reply_containing(fake, ANN, "zanzibarflamingo")
        # A DM whose chat is not the person's id (as on Slack and Discord): found by whom the
        # conversation is with, not by its key.
        fake.private_text(OTHER_DM, "the jacarandaharbour", user_id=ANN)
        await reply_containing(fake, OTHER_DM, "jacarandaharbour")
        fake.group_text(GROUP, "hello bot", user_id=BOB, mention=True)
        await reply_containing(fake, GROUP, "hello bot")
        fake.group_text(GROUP, "what of the quixoticpelican", user_id=ANN, mention=True)
        await reply_containing(fake, GROUP, "quixoticpelican")

        fake.group_text(GROUP, "/forgetme", user_id=ANN, command=True)
        await reply_containing(fake, GROUP, "in a direct message")
        fake.private_text(ANN, "/forgetme")
        question = await reply_containing(fake, ANN, "forget_me(")
        fake.press_button(ANN, question.message_id, button(question, "Refuse"))
        await reply_containing(fake, ANN, "Nothing was erased.")
        kept = await store.personal_data(ann)
        assert len(kept.direct_conversations) == 2
        [in_group] = kept.group_messages
        authors = [m.author for m in in_group.messages if m.role == "user"]
        assert authors == [f"telegram:{ANN}"]

        fake.private_text(ANN, "/forgetme")
        await until(fake, lambda: len(questions(fake)) == 2, "a second question")
        again = questions(fake)[1]
        fake.press_button(ANN, again.message_id, button(again, "Allow"))
        await reply_containing(fake, ANN, "I no longer keep anything about you")

    assert (await store.personal_data(ann)).empty
    group = await store.find_current_session(f"telegram:{fake.token.partition(':')[0]}:{GROUP}")
    assert group is not None
    texts = [m.text for m in await store.list_messages(group.id)]
    assert "hello bot" in texts[0]
    assert TOMBSTONE in texts
    assert not any("quixoticpelican" in text for text in texts)
