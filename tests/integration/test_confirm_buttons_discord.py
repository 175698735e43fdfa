"""Confirmation buttons on Discord: discord.py against the gateway and REST fake.

The question is sent with a row of button components; a press arrives as a component
interaction (INTERACTION_CREATE type 3), is acknowledged (a deferred update) and reaches the
waiting turn; the question is then edited to show the decision, its components removed. A
press by someone other than the asker does not count.
"""

from __future__ import annotations

from typing import Any

from core.backends.sql.store import SqlStore
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from tests.confirming import script, wipe_tool
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.fakes.discord_events import CHANNEL
from tests.integration.discord_helpers import reply_containing, serving
from tests.integration.serving import PATIENCE

ALICE = 42
BOB = 43
# Only admins are asked to confirm a privileged tool (docs/access.md): Alice is one.
ADMINS = frozenset({f"discord:{ALICE}"})


def buttons(message: SentMessage) -> dict[str, str]:
    """Label → custom id of the message's buttons."""
    assert message.components, f"no components on {message.content!r}"
    return {
        button["label"]: button["custom_id"]
        for row in message.components
        for button in row["components"]
    }


def as_json(fake: FakeDiscord, message: SentMessage) -> dict[str, Any]:
    found = fake.bot_message(message.channel_id)
    assert found is not None and int(found["id"]) == message.id
    return found


async def decided(fake: FakeDiscord, question: SentMessage, line: str) -> None:
    await fake.until(lambda: line in question.content, f"the decision {line!r}", PATIENCE)
    assert question.content.startswith("I'd like to run wipe(path=")
    assert question.components is None  # the buttons are gone


async def test_the_allow_button_in_a_dm_lets_the_tool_run(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    ran: list[str] = []
    async with serving(
        fake_discord,
        store,
        ScriptedProvider(script()),
        policy=ChannelPolicy(modes={"discord": "full"}, admins=ADMINS),
        tools=[wipe_tool(ran)],
        confirm_timeout=PATIENCE,
    ):
        fake_discord.dm(ALICE, "wipe it")
        dm = fake_discord.dm_channel_id(ALICE)
        question = await reply_containing(fake_discord, dm, "I'd like to run")
        ids = buttons(question)
        assert list(ids) == ["Allow", "Refuse"]

        pressed = fake_discord.press(as_json(fake_discord, question), ids["Allow"], user_id=ALICE)

        await reply_containing(fake_discord, dm, "Finished.")
        await decided(fake_discord, question, "Allowed by User 42.")
        assert int(pressed["id"]) in fake_discord.deferred_updates
    assert ran == ["/tmp/x"]


async def test_only_the_asker_can_press_in_a_server_channel(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    ran: list[str] = []
    async with serving(
        fake_discord,
        store,
        ScriptedProvider(script()),
        policy=ChannelPolicy(modes={"discord": "full"}, admins=ADMINS),
        tools=[wipe_tool(ran)],
        confirm_timeout=PATIENCE,
    ):
        fake_discord.post(CHANNEL, "wipe it", user_id=ALICE, mention=True)
        question = await reply_containing(fake_discord, CHANNEL, "I'd like to run")
        ids = buttons(question)
        message = as_json(fake_discord, question)

        other = fake_discord.press(message, ids["Allow"], user_id=BOB)
        await fake_discord.until(
            lambda: int(other["id"]) in fake_discord.deferred_updates, "Bob's press", PATIENCE
        )
        fake_discord.press(message, ids["Refuse"], user_id=ALICE)

        await reply_containing(fake_discord, CHANNEL, "Finished.")
        await decided(fake_discord, question, "Refused by User 42.")
    assert ran == []
