"""Telegram catch-up after downtime, end to end: Telegram sends what was missed once the bot
polls again; a late message is answered with a note on how late it is, within the catch-up
limits the other platforms have (how far back, how many per conversation).

Messages are pushed back-dated (`sent_at`), as Telegram delivers a day's pending updates.
"""

from __future__ import annotations

import time

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.providers.base import ModelRequest
from core.providers.scripted import Reply, ScriptedProvider, text_reply
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing, serving

_HOUR = 3600.0
DM = 555
GROUP = -1001234


def _echo(request: ModelRequest) -> Reply:
    return text_reply(f"re: {request.messages[-1].text}")


def _answers(fake: FakeTelegram, chat: int) -> list[str]:
    return [text for text in fake.sent_texts(chat) if text.startswith("re: ")]


async def test_late_messages_get_the_late_note_and_are_capped_per_chat(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    now = time.time()
    # Sent while the bot was away, in the order Telegram keeps them.
    fake.private_text(DM, "too old", sent_at=now - 30 * _HOUR)
    fake.private_text(DM, "one", sent_at=now - 3 * _HOUR)
    fake.private_text(DM, "two", sent_at=now - 2 * _HOUR)
    fake.private_text(DM, "three, past the cap", sent_at=now - 1 * _HOUR)
    fake.group_text(GROUP, "chatter, not for the bot", user_id=77, sent_at=now - _HOUR)
    fake.group_text(GROUP, "late mention", user_id=77, mention=True, sent_at=now - _HOUR)
    provider = ScriptedProvider([_echo] * 20)
    # Even where every group message is answered live, a late one is only if it was for the
    # bot (as the other platforms' catch-up reads).
    everything = ChannelPolicy(group_replies="all")
    async with serving(fake, store, provider, policy=everything, catch_up_messages=2):
        await reply_containing(fake, GROUP, "late mention")
        await reply_containing(fake, DM, "two")
        # On time again: the backlog is over, and this one is answered without a note.
        fake.private_text(DM, "now")
        await reply_containing(fake, DM, "re: now")

    assert _answers(fake, DM) == [
        "re: (sent 3 h ago, while I was offline)\none",
        "re: (sent 2 h ago, while I was offline)\ntwo",
        "re: now",
    ]
    assert _answers(fake, GROUP) == ["re: (sent 1 h ago, while I was offline)\nlate mention"]
    assert len(provider.requests) == 4


async def test_catch_up_turned_off_answers_no_late_message(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    fake.private_text(DM, "while away", sent_at=time.time() - _HOUR)
    provider = ScriptedProvider([_echo] * 5)
    async with serving(fake, store, provider, catch_up_hours=0):
        fake.private_text(DM, "now")
        await reply_containing(fake, DM, "re: now")

    assert _answers(fake, DM) == ["re: now"]
