"""Slack catch-up after downtime, end to end: the real slack_sdk reads the fake's
`conversations.history` at start and what was sent to the bot while it was away is answered
once, in order.

Messages "sent while no bot ran" are built (so the fake keeps them in the channel's history)
and never delivered as events; `sent_at` back-dates one where the test needs it old.
"""

from __future__ import annotations

import time
from typing import Literal

import pytest

from core.backends.sql.store import SqlStore
from core.providers.base import ModelRequest
from core.providers.scripted import Reply, ScriptedProvider, text_reply
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import ALICE, DM_CHANNEL, GENERAL
from tests.integration.slack_helpers import reply_containing, serving

_HOUR = 3600.0


def _echo(request: ModelRequest) -> Reply:
    return text_reply(f"re: {request.messages[-1].text}")


def echoing() -> ScriptedProvider:
    """A provider answering every message with its own text (as the model was given it)."""
    return ScriptedProvider([_echo] * 50)


def _answers(fake: FakeSlack, channel: str) -> list[str]:
    return [text for text in fake.sent_texts(channel) if text.startswith("re: ")]


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_messages_sent_while_down_are_answered_once_in_order_with_a_late_note(
    fake_slack: FakeSlack, store: SqlStore, mode: Literal["http", "socket"]
) -> None:
    fake = fake_slack
    now = time.time()
    provider = echoing()
    async with serving(fake, store, provider, mode=mode, catch_up=True) as bot:
        await bot.send(fake.dm("one", sent_at=now - 3 * _HOUR))
        await bot.send(fake.channel_message("zero", mention=True, sent_at=now - 30 * _HOUR))
        await reply_containing(fake, DM_CHANNEL, "re: one")
        await reply_containing(fake, GENERAL, "re: zero")

    # While the bot is away: built, so in the history, but never delivered. (One dated before
    # the newest message seen there is not missed: the bot would have had it before that one.)
    fake.dm("older than one", sent_at=now - 4 * _HOUR)
    fake.dm("two", sent_at=now - 2 * _HOUR)
    three = fake.dm("three")
    fake.channel_message("four", mention=True)
    fake.channel_message("chatter, not for the bot")
    fake.channel_message("stale", mention=True, sent_at=now - 26 * _HOUR)
    fake.channel_message("fresh", mention=True)

    async with serving(fake, store, provider, mode=mode, catch_up=True) as bot:
        # Slack retries an event it could not deliver: the message comes live as well.
        await bot.send(three, retry_num=1)
        await bot.send(fake.dm("after"))
        await reply_containing(fake, DM_CHANNEL, "re: after")
        await reply_containing(fake, GENERAL, "re: four")
        await reply_containing(fake, GENERAL, "re: fresh")

    assert _answers(fake, DM_CHANNEL) == [
        "re: one",
        "re: (sent 2 h ago, while I was offline)\ntwo",
        "re: three",
        "re: after",
    ]
    # Each mention in the channel starts a thread, a session of its own: "four" and "fresh"
    # are answered side by side, in either order.
    general = _answers(fake, GENERAL)
    assert general[0] == "re: zero" and sorted(general[1:]) == ["re: four", "re: fresh"]
    [dm_read] = [
        c for c in fake.calls_to("conversations.history") if c.params["channel"] == "D0ALICE"
    ]
    assert dm_read.params["limit"] == "100"


async def test_a_second_start_answers_nothing_again_and_zero_turns_it_off(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True) as bot:
        await bot.send(fake.dm("one"))
        await reply_containing(fake, DM_CHANNEL, "re: one")
    fake.dm("two")
    async with serving(fake, store, provider, catch_up=True):
        await reply_containing(fake, DM_CHANNEL, "re: two")
    async with serving(fake, store, provider, catch_up=True) as bot:
        await bot.send(fake.dm("three"))
        await reply_containing(fake, DM_CHANNEL, "re: three")
    fake.dm("missed")
    reads = len(fake.calls_to("conversations.history"))
    async with serving(fake, store, provider, catch_up=True, catch_up_messages=0) as bot:
        await bot.send(fake.dm("four"))
        await reply_containing(fake, DM_CHANNEL, "re: four")

    assert _answers(fake, DM_CHANNEL) == ["re: one", "re: two", "re: three", "re: four"]
    assert len(provider.requests) == 4
    assert len(fake.calls_to("conversations.history")) == reads


async def test_thread_replies_sent_while_down_are_answered_in_their_threads(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True) as bot:
        question = fake.channel_message("question", mention=True)
        await bot.send(question)
        await reply_containing(fake, GENERAL, "re: question")
        # A later mention elsewhere in the channel: the history read starts after it.
        await bot.send(fake.channel_message("another", mention=True))
        await reply_containing(fake, GENERAL, "re: another")
    thread = question["event"]["ts"]

    # While the bot is away: a follow-up in the bot's thread (no mention: in a thread the bot
    # takes part in, every message is for it), chatter in a thread it never joined, and a new
    # mention that gets a follow-up of its own.
    fake.channel_message("follow-up", thread_ts=thread, parent_user_id=ALICE)
    other = fake.channel_message("not for the bot")
    fake.channel_message("chatter", thread_ts=other["event"]["ts"], parent_user_id=ALICE)
    new = fake.channel_message("new question", mention=True)
    fake.channel_message("and more", thread_ts=new["event"]["ts"], parent_user_id=ALICE)

    async with serving(fake, store, provider, catch_up=True):
        await reply_containing(fake, GENERAL, "re: and more")
        await reply_containing(fake, GENERAL, "re: follow-up")

    answers = {m.text: m.thread_ts for m in fake.sent(GENERAL) if m.text.startswith("re: ")}
    assert answers == {
        "re: question": thread,
        "re: another": answers["re: another"],
        "re: follow-up": thread,
        "re: new question": new["event"]["ts"],
        "re: and more": new["event"]["ts"],
    }
    assert len(provider.requests) == 5
    assert all(c.params["limit"] == "100" for c in fake.calls_to("conversations.replies"))
