"""Discord catch-up after downtime, end to end: the real discord.py reads the fake's channel
history at start and what was sent to the bot while it was away is answered once, in order.

Messages "sent while no bot ran" are put in the fake's history without a gateway event
(`live=False`), back-dated with `sent_at` where the test needs an old one: nothing waits for
time to pass.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.backends.sql.store import SqlStore
from core.providers.base import ModelRequest
from core.providers.scripted import Reply, ScriptedProvider, text_reply
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL, OTHER_CHANNEL
from tests.integration.discord_helpers import reply_containing, serving
from tests.integration.serving import PATIENCE

ALICE = 42
BOB = 43


def _echo(request: ModelRequest) -> Reply:
    return text_reply(f"re: {request.messages[-1].text}")


def echoing() -> ScriptedProvider:
    """A provider answering every message with its own text (as the model was given it)."""
    return ScriptedProvider([_echo] * 50)


def _answers(fake: FakeDiscord, channel_id: int) -> list[str]:
    return [text for text in fake.sent_texts(channel_id) if text.startswith("re: ")]


async def test_messages_sent_while_down_are_answered_once_in_order_with_a_late_note(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    now = datetime.now(UTC)
    dm = fake.dm_channel_id(ALICE)
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05) as bot:
        await bot.adapter.caught_up.wait()  # the first start: nothing to catch up
        fake.dm(ALICE, "one", sent_at=now - timedelta(hours=3))
        fake.post(OTHER_CHANNEL, "zero", mention=True, sent_at=now - timedelta(hours=30))
        await reply_containing(fake, dm, "re: one")
        await reply_containing(fake, OTHER_CHANNEL, "re: zero")

    # While the bot is away. (One dated before the newest message seen there is not missed:
    # the bot would have had it before that one.)
    fake.dm(ALICE, "older than one", sent_at=now - timedelta(hours=4), live=False)
    fake.dm(ALICE, "two", sent_at=now - timedelta(hours=2), live=False)
    three = fake.dm(ALICE, "three", live=False)
    fake.post(CHANNEL, "four", mention=True, live=False)
    fake.post(CHANNEL, "chatter, not for the bot", live=False)
    fake.post(OTHER_CHANNEL, "stale", mention=True, sent_at=now - timedelta(hours=26), live=False)
    fake.post(OTHER_CHANNEL, "fresh", mention=True, live=False)

    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05) as bot:
        # The same message arrives live while catch-up reads it from the history.
        fake.redeliver(three)
        await bot.adapter.caught_up.wait()
        await reply_containing(fake, dm, "re: three")
        await reply_containing(fake, CHANNEL, "re: four")
        await reply_containing(fake, OTHER_CHANNEL, "re: fresh")
        fake.dm(ALICE, "after")
        await reply_containing(fake, dm, "re: after")

    assert _answers(fake, dm) == [
        "re: one",
        "re: (sent 2 h ago, while I was offline)\ntwo",
        "re: three",
        "re: after",
    ]
    assert _answers(fake, CHANNEL) == ["re: four"]
    assert _answers(fake, OTHER_CHANNEL) == ["re: zero", "re: fresh"]
    # History is read after the newest message seen, never further back than the bound.
    [dm_read] = fake.requests_named("history", dm)
    assert dm_read.query["limit"] == "100"
    assert int(dm_read.query["after"]) == int(fake.inbound_ids("one")[0])


async def test_a_second_start_answers_nothing_again(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    dm = fake.dm_channel_id(ALICE)
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05):
        fake.dm(ALICE, "one")
        await reply_containing(fake, dm, "re: one")
    fake.dm(ALICE, "two", live=False)
    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05) as bot:
        await bot.adapter.caught_up.wait()
        await reply_containing(fake, dm, "re: two")

    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05) as bot:
        await bot.adapter.caught_up.wait()
        fake.dm(ALICE, "three")
        await reply_containing(fake, dm, "re: three", PATIENCE)

    assert _answers(fake, dm) == ["re: one", "re: two", "re: three"]
    assert len(provider.requests) == 3


async def test_catch_up_off_reads_no_history(fake_discord: FakeDiscord, store: SqlStore) -> None:
    fake = fake_discord
    dm = fake.dm_channel_id(ALICE)
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05):
        fake.dm(ALICE, "one")
        await reply_containing(fake, dm, "re: one")
    fake.dm(ALICE, "missed", live=False)
    async with serving(
        fake, store, provider, catch_up=True, ready_timeout=0.05, catch_up_hours=0
    ) as bot:
        await bot.adapter.caught_up.wait()
        fake.dm(ALICE, "two")
        await reply_containing(fake, dm, "re: two")

    assert _answers(fake, dm) == ["re: one", "re: two"]
    assert fake.requests_named("history") == []


async def test_a_resumed_session_reads_no_history_and_keeps_answering(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    dm = fake.dm_channel_id(ALICE)
    provider = echoing()
    async with serving(fake, store, provider, catch_up=True, ready_timeout=0.05) as bot:
        fake.dm(ALICE, "one")
        await reply_containing(fake, dm, "re: one")
        await bot.adapter.caught_up.wait()
        reads = len(fake.requests_named("history"))
        fake.drop_connection()
        fake.dm(ALICE, "while away")  # kept for the resume, as Discord does
        await fake.wait_resumed()
        await reply_containing(fake, dm, "re: while away")
        fake.dm(ALICE, "two")
        await reply_containing(fake, dm, "re: two")

    assert _answers(fake, dm) == ["re: one", "re: while away", "re: two"]
    assert len(fake.requests_named("history")) == reads
