"""Status reactions on Telegram: the real python-telegram-bot, our adapter, gateway and worker,
against the Bot API fake (`setMessageReaction`).

Telegram lets bots react only with its fixed set of emoji: 👀 when the turn starts, 👍 once
answered, 😢 when the turn failed. Each call replaces the bot's earlier reaction.
"""

from __future__ import annotations

import logging

import pytest

from bots.platforms import REGISTERED
from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter
from core.backends.sql.store import SqlStore
from core.errors import ProviderError
from core.profile import Profile, ProfileSettings
from core.providers.scripted import ScriptedProvider, text_reply
from core.store.replies import MemoryReplyRecords
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import calls_to, reply_containing, serving, until

DM = 555
GROUP = -100123


def reactions_on(fake: FakeTelegram, chat: int, message: int) -> list[list[str]]:
    """The emoji of each `setMessageReaction` call on one message, in order."""
    return [
        [r["emoji"] for r in call.params.get("reaction") or []]
        for call in calls_to(fake, "setMessageReaction", chat)
        if call.params["message_id"] == message
    ]


async def test_taken_then_answered_replaces_it(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    async with serving(fake, store, ScriptedProvider([text_reply("Here you are")])):
        asked = fake.private_text(DM, "hello")["message"]["message_id"]
        await reply_containing(fake, DM, "Here you are")
        await until(fake, lambda: fake.reactions.get((DM, asked)) == ["👍"], "the answered mark")

    assert reactions_on(fake, DM, asked) == [["👀"], ["👍"]]
    taken, answered = calls_to(fake, "setMessageReaction", DM)
    [sent] = calls_to(fake, "sendMessage", DM)
    assert taken.index < sent.index < answered.index


async def test_a_failed_turn_gets_the_failed_reaction(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = ScriptedProvider([ProviderError("auth", "invalid key", provider="anthropic")])
    async with serving(fake, store, provider):
        asked = fake.group_text(GROUP, "hello", user_id=7, mention=True)["message"]["message_id"]
        await until(fake, lambda: fake.reactions.get((GROUP, asked)) == ["😢"], "the failed mark")

    assert reactions_on(fake, GROUP, asked) == [["👀"], ["😢"]]
    assert len(fake.sent_texts(GROUP)) == 1  # the apology


async def test_off_in_the_profile_no_reaction_is_set(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = ScriptedProvider([text_reply("first"), text_reply("second")])
    async with serving(fake, store, provider, reactions=False):
        fake.private_text(DM, "one")
        await reply_containing(fake, DM, "first")
        # One chat's deliveries go out in order: once the second answer is there, whatever
        # the first turn would have set is set.
        fake.private_text(DM, "two")
        await reply_containing(fake, DM, "second")

    assert calls_to(fake, "setMessageReaction") == []


async def test_a_refused_reaction_does_not_stop_the_answer(
    fake_telegram: FakeTelegram, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="channels.telegram.adapter")
    fake = fake_telegram
    fake.fail_next(
        "setMessageReaction",
        error_code=400,
        description="Bad Request: REACTION_INVALID",
        retry_after=None,
        times=2,
    )
    provider = ScriptedProvider([text_reply("answered anyway"), text_reply("and again")])
    async with serving(fake, store, provider):
        asked = fake.private_text(DM, "hello")["message"]["message_id"]
        await reply_containing(fake, DM, "answered anyway")
        # One chat's deliveries go out in order: once the next answer is there, the first
        # turn's reaction calls are over.
        fake.private_text(DM, "still there?")
        await reply_containing(fake, DM, "and again")

    assert (DM, asked) not in fake.reactions
    refusals = [r for r in caplog.records if "reaction" in r.getMessage()]
    # Logged once as a warning; the same refusal again only at debug level.
    assert [r.levelno for r in refusals] == [logging.WARNING, logging.DEBUG]
    assert "reaction_invalid" in refusals[0].getMessage().lower()


def test_the_profile_table_turns_reactions_off() -> None:
    profile = Profile(
        name="p", settings=ProfileSettings(channels={"telegram": {"reactions": False}})
    )
    replies = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    env = {"TELEGRAM_BOT_TOKEN": FakeTelegram().token}
    adapter = REGISTERED.adapter_for("telegram", env, profile, (), replies)
    assert isinstance(adapter, TelegramAdapter)
    assert adapter.settings.reactions is False
    default = REGISTERED.adapter_for("telegram", env, None, (), replies)
    assert isinstance(default, TelegramAdapter)
    assert default.settings.reactions is True
