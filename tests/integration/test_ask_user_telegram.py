"""The `ask_user` tool on Telegram: python-telegram-bot against the Bot API fake.

The model asks; the question appears in the chat without buttons; the asker's next message
(in a group, without mentioning the bot) is the tool's result, and no turn of its own.
Someone else's message in the group is no answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.sql.store import SqlStore
from core.messages import ToolCall
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.tools.ask_user import ASK_USER
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, running_bot
from tests.integration.telegram_helpers import reply_containing

DM = 555
GROUP = -100777
ADMINS = frozenset({f"telegram:{DM}", "telegram:1"})
QUESTION = "Which colour should the logo be?"


@asynccontextmanager
async def bot(fake: FakeTelegram, store: SqlStore) -> AsyncIterator[ScriptedProvider]:
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name=ASK_USER, arguments={"question": QUESTION})),
            text_reply("A logo it is."),
            text_reply("Hello, Bob."),
        ]
    )
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    async with running_bot(
        adapter,
        store,
        provider,
        ready=lambda: fake.wait_idle_poll(timeout=PATIENCE),
        policy=ChannelPolicy(
            modes={"telegram": "safe-chat"}, admins=ADMINS, group_replies="mention"
        ),
        ask_timeout=PATIENCE,
    ):
        yield provider


async def test_the_next_message_in_a_dm_answers_the_question(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    async with bot(fake_telegram, store) as provider:
        fake_telegram.private_text(DM, "make me a logo")
        question = await reply_containing(fake_telegram, DM, QUESTION)
        assert question.reply_markup is None  # a free answer: no Allow/Refuse buttons

        fake_telegram.private_text(DM, "Blue")

        await reply_containing(fake_telegram, DM, "A logo it is.")
    assert len(provider.requests) == 2  # "Blue" started no turn
    assert provider.requests[1].messages[-1].text == "User555 answered: Blue"


async def test_in_a_group_only_the_askers_message_answers(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    async with bot(fake_telegram, store) as provider:
        fake_telegram.group_text(GROUP, "make me a logo", user_id=1, mention=True)
        await reply_containing(fake_telegram, GROUP, QUESTION)

        fake_telegram.group_text(GROUP, "hi bot", user_id=2, mention=True)
        fake_telegram.group_text(GROUP, "Green", user_id=1)

        await reply_containing(fake_telegram, GROUP, "A logo it is.")
        await reply_containing(fake_telegram, GROUP, "Hello, Bob.")  # its own turn, after
    assert provider.requests[1].messages[-1].text == "User1 answered: Green"
    assert provider.requests[2].messages[-1].text == "hi bot"
