"""Confirmation buttons on Slack: slack-bolt against the Web API fake, both transports.

The question is posted with Block Kit buttons; a press arrives as `block_actions` (a signed
form POST to the Events API endpoint, or an `interactive` envelope over Socket Mode), is
acknowledged and reaches the waiting turn; the question is then updated to show the decision,
its buttons replaced. A press by someone other than the asker does not count.
"""

from __future__ import annotations

from typing import Literal

import pytest

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from tests.confirming import script, wipe_tool
from tests.fakes.slack_api import FakeSlack, SentMessage
from tests.fakes.slack_events import ALICE, BOB, DM_CHANNEL, GENERAL
from tests.integration.serving import PATIENCE
from tests.integration.slack_helpers import Serving, reply_containing, serving

Mode = Literal["http", "socket"]


def button_values(message: SentMessage) -> dict[str, str]:
    """Label → value of the message's buttons."""
    assert message.blocks, f"no blocks on {message.text!r}"
    return {
        element["text"]["text"]: element["value"]
        for block in message.blocks
        if block["type"] == "actions"
        for element in block["elements"]
    }


async def press(bot: Serving, message: SentMessage, value: str, user: str) -> None:
    payload = bot.fake.block_actions(message, value, user=user)
    if bot.mode == "socket":
        envelope = await bot.fake.send_socket_interaction(payload)
        await bot.fake.wait_for_ack(envelope, timeout=PATIENCE)
        return
    status, text = await bot.fake.post_interaction(bot.events_url, payload)
    assert status == 200, (status, text)


async def decided(fake: FakeSlack, question: SentMessage, line: str) -> None:
    await fake.until(lambda: line in question.text, f"the decision {line!r}", PATIENCE)
    assert question.text.startswith("I'd like to run wipe(path=")
    assert question.blocks is not None
    assert [block["type"] for block in question.blocks] == ["section"]  # no buttons left


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_the_allow_button_lets_the_tool_run(
    fake_slack: FakeSlack, store: SqlStore, mode: Mode
) -> None:
    ran: list[str] = []
    async with serving(
        fake_slack,
        store,
        ScriptedProvider(script()),
        mode=mode,
        policy=ChannelPolicy(modes={"slack": "full"}, admins=frozenset({f"slack:{ALICE}"})),
        tools=[wipe_tool(ran)],
        confirm_timeout=PATIENCE,
    ) as bot:
        await bot.send(fake_slack.dm("wipe it"))
        question = await reply_containing(fake_slack, DM_CHANNEL, "I'd like to run")
        values = button_values(question)
        assert list(values) == ["Allow", "Refuse"]

        await press(bot, question, values["Allow"], ALICE)

        await reply_containing(fake_slack, DM_CHANNEL, "Finished.")
        await decided(fake_slack, question, "Allowed by u0alice.")
    assert ran == ["/tmp/x"]


async def test_only_the_asker_can_press_in_a_channel_thread(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    ran: list[str] = []
    async with serving(
        fake_slack,
        store,
        ScriptedProvider(script()),
        policy=ChannelPolicy(modes={"slack": "full"}, admins=frozenset({f"slack:{ALICE}"})),
        tools=[wipe_tool(ran)],
        confirm_timeout=PATIENCE,
    ) as bot:
        await bot.send(fake_slack.channel_message("wipe it", mention=True))
        question = await reply_containing(fake_slack, GENERAL, "I'd like to run")
        assert question.thread_ts is not None  # asked in the mention's thread
        values = button_values(question)

        await press(bot, question, values["Allow"], BOB)
        await press(bot, question, values["Refuse"], ALICE)

        await reply_containing(fake_slack, GENERAL, "Finished.")
        await decided(fake_slack, question, "Refused by u0alice.")
    assert ran == []
