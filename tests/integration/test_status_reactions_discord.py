"""Status reactions on Discord: the real discord.py, our adapter, gateway and worker, against the
Discord fake (PUT / DELETE `…/reactions/{emoji}/@me`).

👀 while the turn runs, replaced by ✅ once answered or ⚠️ when the turn failed.
"""

from __future__ import annotations

import logging

import pytest

from bots.platforms import REGISTERED
from channels.discord.adapter import DiscordAdapter
from channels.streaming import IncrementalRender, ReplyStreams
from core.backends.sql.store import SqlStore
from core.errors import ProviderError
from core.profile import Profile, ProfileSettings
from core.providers.scripted import ScriptedProvider, text_reply
from core.store.replies import MemoryReplyRecords
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.integration.discord_helpers import MENU, reply_containing, serving

ALICE = 42


def steps_on(fake: FakeDiscord, message: int) -> list[str]:
    """The reaction requests on one message, in order."""
    return [
        request.name
        for request in fake.requests
        if request.name in ("add_reaction", "remove_own_reaction")
        and f"/messages/{message}/reactions/" in request.path
    ]


async def test_taken_then_answered_replaces_it(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    async with serving(fake, store, ScriptedProvider([text_reply("Here you are")])):
        asked = int(fake.dm(ALICE, "hello")["id"])
        dm = fake.dm_channel_id(ALICE)
        await reply_containing(fake, dm, "Here you are")
        await fake.until(lambda: fake.reactions[(dm, asked)] == {"✅"}, "the answered mark")

    taken, removed, answered = (
        r for r in fake.requests if r.name in ("add_reaction", "remove_own_reaction")
    )
    [sent] = fake.requests_named("create_message", dm)
    assert taken.index < sent.index < removed.index < answered.index
    assert [r.name for r in (taken, removed, answered)] == [
        "add_reaction",
        "remove_own_reaction",
        "add_reaction",
    ]
    assert f"/messages/{asked}/" in answered.path


async def test_a_failed_turn_gets_the_warning_reaction_on_the_message_a_thread_starts_at(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = ScriptedProvider([ProviderError("auth", "invalid key", provider="anthropic")])
    async with serving(fake, store, provider, reply_in_thread=True):
        asked = int(fake.post(CHANNEL, "plan the offsite", user_id=ALICE, mention=True)["id"])
        # The answer goes into a thread started on the message (the thread has its id); the
        # reactions go on the message, in the channel.
        await fake.until(lambda: fake.reactions[(CHANNEL, asked)] == {"⚠️"}, "the failed mark")

    assert len(fake.sent_texts(asked)) == 1  # the apology, in the thread
    assert steps_on(fake, asked) == [
        "add_reaction",
        "remove_own_reaction",
        "add_reaction",
    ]


async def test_off_in_the_profile_no_reaction_is_made(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    provider = ScriptedProvider([text_reply("first"), text_reply("second")])
    async with serving(fake, store, provider, reactions=False):
        fake.dm(ALICE, "one")
        dm = fake.dm_channel_id(ALICE)
        await reply_containing(fake, dm, "first")
        # One chat's deliveries go out in order: once the second answer is there, whatever
        # the first turn would have done is done.
        fake.dm(ALICE, "two")
        await reply_containing(fake, dm, "second")

    assert fake.requests_named("add_reaction") == fake.requests_named("remove_own_reaction") == []


async def test_a_refused_reaction_does_not_stop_the_answer(
    fake_discord: FakeDiscord, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="channels.discord.adapter")
    fake = fake_discord
    # The bot's role lacks Add Reactions in this channel.
    fake.fail_next("add_reaction", status=403, code=50013, message="Missing Permissions", times=2)
    provider = ScriptedProvider([text_reply("answered anyway"), text_reply("and again")])
    async with serving(fake, store, provider):
        asked = int(fake.post(CHANNEL, "hello", user_id=ALICE, mention=True)["id"])
        await reply_containing(fake, CHANNEL, "answered anyway")
        # One chat's deliveries go out in order: once the next answer is there, the first
        # turn's reaction calls are over.
        fake.post(CHANNEL, "still there?", user_id=ALICE, mention=True)
        await reply_containing(fake, CHANNEL, "and again")

    assert fake.reactions[(CHANNEL, asked)] == set()
    refusals = [r for r in caplog.records if "reaction" in r.getMessage()]
    # Logged once as a warning; the same refusal again only at debug level.
    assert [r.levelno for r in refusals] == [logging.WARNING, logging.DEBUG]
    assert "Missing Permissions" in refusals[0].getMessage()


def test_the_profile_table_turns_reactions_off() -> None:
    profile = Profile(
        name="p", settings=ProfileSettings(channels={"discord": {"reactions": False}})
    )
    replies = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    env = {"DISCORD_BOT_TOKEN": FakeDiscord().token}
    adapter = REGISTERED.adapter_for("discord", env, profile, MENU, replies)
    assert isinstance(adapter, DiscordAdapter)
    assert adapter.settings.reactions is False
    default = REGISTERED.adapter_for("discord", env, None, MENU, replies)
    assert isinstance(default, DiscordAdapter)
    assert default.settings.reactions is True


async def test_a_slash_command_gets_no_reaction(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    provider = ScriptedProvider([text_reply("Because of 42."), text_reply("next")])
    async with serving(fake, store, provider):
        fake.slash("ask", channel_id=CHANNEL, user_id=ALICE, options={"question": "why?"})
        await reply_containing(fake, CHANNEL, "Because of 42.")
        # The slash command's interaction has no message to react on ("thinking…" shows
        # work); a later message in the chat shows its turn's calls are over.
        fake.post(CHANNEL, "and now?", user_id=ALICE, mention=True)
        await reply_containing(fake, CHANNEL, "next")
        await fake.until(lambda: len(fake.requests_named("add_reaction")) == 2, "the message's")

    asked = [r.path for r in fake.requests if r.name in ("add_reaction", "remove_own_reaction")]
    assert len({path.split("/reactions/")[0] for path in asked}) == 1  # one message only
