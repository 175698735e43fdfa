"""Status reactions on Slack: the real slack-bolt and slack_sdk, our adapter, gateway and worker,
against the Web API fake (`reactions.add` / `reactions.remove`).

`eyes` while the turn runs, replaced by `white_check_mark` once answered or `warning` when the
turn failed. (The taken and answered steps, beside the assistant status, are in
`test_slack_adapter.py`'s "showing work" tests.)
"""

from __future__ import annotations

import logging

import pytest

from bots.platforms import REGISTERED
from channels.slack.adapter import SlackAdapter
from channels.streaming import IncrementalRender, ReplyStreams
from core.backends.sql.store import SqlStore
from core.errors import ProviderError
from core.profile import Profile, ProfileSettings
from core.providers.scripted import ScriptedProvider, text_reply
from core.store.replies import MemoryReplyRecords
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import DM_CHANNEL, GENERAL
from tests.integration.slack_helpers import MENU, reply_containing, serving


def steps_on(fake: FakeSlack, ts: str) -> list[tuple[str, str]]:
    """The reaction calls on one message, in order: (method, name)."""
    calls = [*fake.calls_to("reactions.add"), *fake.calls_to("reactions.remove")]
    on = sorted((c for c in calls if c.params["timestamp"] == ts), key=lambda c: c.index)
    return [(c.method, c.params["name"]) for c in on]


async def test_a_failed_turn_gets_the_warning_reaction(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = ScriptedProvider([ProviderError("auth", "invalid key", provider="anthropic")])
    async with serving(fake, store, provider) as bot:
        mention = fake.channel_message("work on this", mention=True)
        await bot.send(mention)
        key = (GENERAL, mention["event"]["ts"])
        await fake.until(lambda: fake.reactions[key] == {"warning"}, "the failed mark")

    assert steps_on(fake, key[1]) == [
        ("reactions.add", "eyes"),
        ("reactions.remove", "eyes"),
        ("reactions.add", "warning"),
    ]
    assert len(fake.sent_texts(GENERAL)) == 1  # the apology


async def test_off_in_the_profile_no_reaction_is_made(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    provider = ScriptedProvider([text_reply("first"), text_reply("second")])
    async with serving(fake, store, provider, reactions=False) as bot:
        await bot.send(fake.dm("one"))
        await reply_containing(fake, DM_CHANNEL, "first")
        # One conversation's deliveries go out in order: once the second answer is there,
        # whatever the first turn would have done is done.
        await bot.send(fake.dm("two"))
        await reply_containing(fake, DM_CHANNEL, "second")

    assert fake.calls_to("reactions.add") == fake.calls_to("reactions.remove") == []


async def test_a_refused_reaction_does_not_stop_the_answer(
    fake_slack: FakeSlack, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="channels.slack.adapter")
    fake = fake_slack
    # The app was installed without the reactions:write scope.
    fake.fail_next("reactions.add", error="missing_scope", status=200, retry_after=None, times=2)
    provider = ScriptedProvider([text_reply("answered anyway"), text_reply("and again")])
    async with serving(fake, store, provider) as bot:
        event = fake.dm("hello")
        await bot.send(event)
        await reply_containing(fake, DM_CHANNEL, "answered anyway")
        # One conversation's deliveries go out in order: once the next answer is there, the
        # first turn's reaction calls are over.
        await bot.send(fake.dm("still there?"))
        await reply_containing(fake, DM_CHANNEL, "and again")

    assert fake.reactions[(DM_CHANNEL, event["event"]["ts"])] == set()
    refusals = [r for r in caplog.records if "reaction" in r.getMessage()]
    # Logged once as a warning; the same refusal again only at debug level.
    assert [r.levelno for r in refusals] == [logging.WARNING, logging.DEBUG]
    assert "missing_scope" in refusals[0].getMessage()


def test_the_profile_table_turns_reactions_off() -> None:
    profile = Profile(name="p", settings=ProfileSettings(channels={"slack": {"reactions": False}}))
    replies = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    env = {"SLACK_BOT_TOKEN": FakeSlack().bot_token, "SLACK_SIGNING_SECRET": "s3cret"}
    adapter = REGISTERED.adapter_for("slack", env, profile, MENU, replies)
    assert isinstance(adapter, SlackAdapter)
    assert adapter.settings.reactions is False
    default = REGISTERED.adapter_for("slack", env, None, MENU, replies)
    assert isinstance(default, SlackAdapter)
    assert default.settings.reactions is True
