"""Access end to end: pairing, approval, revocation and admin-only commands, through the real
Telegram and Slack client libraries against their fakes, with the product's access defaults.

A stranger's DM gets a pairing code and nothing else (no model call); once approved (what
`switchboard pairing approve` does), their next message is answered; once revoked, it is not.
Negatives are shown with a later message in the same chat, answered in arrival order.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.platforms import REGISTERED
from core.access import Pairing
from core.backends.sql.store import SqlStore, sqlite_url
from core.fencing import Fence
from core.messages import Message
from core.policy import ChannelPolicy, PlatformAccess
from core.providers.scripted import ScriptedProvider, text_reply
from core.store.turns import TurnClose
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import ALICE, BOB, DM_CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration import slack_helpers, telegram_helpers
from tests.integration.serving import PATIENCE

STRANGER = 555  # a Telegram private chat: the user's id is the chat's id
ADMIN = 42
CODE = re.compile(r"pairing code is ([A-Z2-9]{8})")
CAROL = "U0CAROL"  # a second Slack stranger


def product_policy(**fields: object) -> ChannelPolicy:
    """The policy `bots/app.py` builds from a profile with no [access] tables."""
    return ChannelPolicy.model_validate(
        {
            "modes": REGISTERED.default_modes(),
            "default_access": PlatformAccess(),
            "local_platforms": REGISTERED.local_platforms(),
            **fields,
        }
    )


class WatchedStore(SqlStore):
    """The SQLite store, telling the test which inbound messages were handled (marked), so a
    message that gets no answer can be waited for."""

    marked: list[str]
    _changed: asyncio.Event

    async def close_turn(self, closing: TurnClose, *, fence: Fence | None = None) -> list[Message]:
        stored = await super().close_turn(closing, fence=fence)
        if closing.finished is not None:
            self.marked.append(closing.finished)
            self._changed.set()
        return stored

    async def until_handled(self, prefix: str, count: int) -> None:
        """Wait until `count` messages whose key starts with `prefix` were handled."""
        async with asyncio.timeout(PATIENCE):
            while len([k for k in self.marked if k.startswith(prefix)]) < count:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[WatchedStore]:
    opened = await WatchedStore.open(sqlite_url(tmp_path / "watched.db"))
    assert isinstance(opened, WatchedStore)
    opened.marked = []
    opened._changed = asyncio.Event()
    try:
        yield opened
    finally:
        await opened.close()


def code_in(text: str) -> str:
    found = CODE.search(text)
    assert found is not None, text
    return found.group(1)


async def test_telegram_stranger_gets_a_code_then_answers_once_approved_until_revoked(
    fake_telegram: FakeTelegram, watched: WatchedStore
) -> None:
    fake = fake_telegram
    store = watched
    provider = ScriptedProvider([text_reply("hello, friend")])
    pairing = Pairing(store)
    async with telegram_helpers.serving(fake, store, provider, policy=product_policy()):
        fake.private_text(STRANGER, "hello?")
        first = await telegram_helpers.reply_containing(fake, STRANGER, "pairing code")
        code = code_in(first.text)
        # Asking again while the request is pending brings the same code back, no new one.
        fake.private_text(STRANGER, "/start")
        fake.private_text(STRANGER, "anyone there?")
        await store.until_handled(f"telegram:{telegram_helpers.BOT_KEY}:{STRANGER}:", 3)
        await telegram_helpers.until(
            fake, lambda: len(fake.sent_texts(STRANGER)) == 3, "the code again"
        )
        assert [code_in(text) for text in fake.sent_texts(STRANGER)] == [code] * 3
        [request] = await pairing.pending("telegram")
        assert (request.user_id, request.code) == (str(STRANGER), code)

        assert await pairing.approve("telegram", code.lower()) is not None
        fake.private_text(STRANGER, "hi again")
        await telegram_helpers.reply_containing(fake, STRANGER, "hello, friend")

        assert await pairing.revoke("telegram", str(STRANGER))
        fake.private_text(STRANGER, "still me")
        await telegram_helpers.until(
            fake, lambda: len(fake.sent_texts(STRANGER)) == 5, "a new pairing code"
        )

    texts = fake.sent_texts(STRANGER)
    assert texts[3] == "hello, friend"
    assert code_in(texts[4]) != code
    # One model call in all: only the approved person's message reached the model.
    assert len(provider.requests) == 1
    assert provider.requests[0].messages[-1].text == "hi again"
    assert await pairing.pending("telegram") != []


async def test_telegram_admin_approves_in_chat_and_others_may_not(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = ScriptedProvider([text_reply("welcome")])
    policy = product_policy(admins=frozenset({f"telegram:{ADMIN}"}))
    async with telegram_helpers.serving(fake, store, provider, policy=policy):
        fake.private_text(STRANGER, "let me in")
        code = code_in(
            (await telegram_helpers.reply_containing(fake, STRANGER, "pairing code")).text
        )
        fake.private_text(ADMIN, f"/approve {code}")
        approved = await telegram_helpers.reply_containing(fake, ADMIN, "Approved")
        fake.private_text(STRANGER, "thanks")
        await telegram_helpers.reply_containing(fake, STRANGER, "welcome")
        # An approved person is not an admin: /approve is refused politely, /help hides it.
        fake.private_text(STRANGER, "/approve ABCDEFGH")
        refusal = await telegram_helpers.reply_containing(fake, STRANGER, "Only an admin")
        fake.private_text(STRANGER, "/help")
        their_help = await telegram_helpers.reply_containing(fake, STRANGER, "Commands:")
        # Another stranger, denied by the admin in the chat.
        fake.private_text(STRANGER + 1, "me too")
        other = code_in(
            (await telegram_helpers.reply_containing(fake, STRANGER + 1, "pairing code")).text
        )
        fake.private_text(ADMIN, f"/deny telegram {other}")
        denied = await telegram_helpers.reply_containing(fake, ADMIN, "Denied")
        fake.private_text(ADMIN, "/help")
        admin_help = await telegram_helpers.reply_containing(fake, ADMIN, "Commands:")

    assert f"telegram user {STRANGER}" in approved.text
    assert refusal.text == "Only an admin of this bot can use /approve."
    assert "/approve" not in their_help.text
    assert "/approve" in admin_help.text and "/deny" in admin_help.text
    assert denied.text == (
        f"Denied the pairing request of User{STRANGER + 1} (telegram user {STRANGER + 1})."
    )
    assert await Pairing(store).pending() == []
    assert len(provider.requests) == 1


async def test_telegram_disabled_dms_refuse_once_and_admins_still_get_through(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    provider = ScriptedProvider([text_reply("yes, boss")])
    policy = product_policy(
        admins=frozenset({f"telegram:{ADMIN}"}),
        access={"telegram": PlatformAccess(dm_policy="disabled")},
    )
    async with telegram_helpers.serving(fake, store, provider, policy=policy):
        fake.private_text(STRANGER, "hello?")
        fake.private_text(STRANGER, "hello??")
        await telegram_helpers.reply_containing(fake, STRANGER, "only answers the people")
        fake.private_text(ADMIN, "status?")
        await telegram_helpers.reply_containing(fake, ADMIN, "yes, boss")

    assert len(fake.sent_texts(STRANGER)) == 1
    assert await Pairing(store).pending() == []
    # The admin's DM runs in `full`.
    assert "trusted operator" in provider.requests[0].system


async def test_slack_stranger_gets_a_code_and_is_answered_once_approved(
    fake_slack: FakeSlack, watched: WatchedStore
) -> None:
    fake = fake_slack
    store = watched
    provider = ScriptedProvider([text_reply("hi from the bot")])
    pairing = Pairing(store)
    async with slack_helpers.serving(fake, store, provider, policy=product_policy()) as bot:
        await bot.send(fake.dm("hello"))
        first = await slack_helpers.reply_containing(fake, DM_CHANNEL, "pairing code")
        code = code_in(first.text)
        await bot.send(fake.dm("hello again"))
        await store.until_handled(f"slack:{bot.adapter.bot_key}:{DM_CHANNEL}:", 2)
        await fake.until(lambda: len(fake.messages.get(DM_CHANNEL, [])) == 2, "the code again", 5.0)
        assert code_in(fake.messages[DM_CHANNEL][1].text) == code
        [request] = await pairing.pending("slack")
        assert request.code == code

        approval = await pairing.approve("slack", code)
        assert approval is not None and not approval.admin
        await bot.send(fake.dm("now?"))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "hi from the bot")

        assert await pairing.revoke("slack", approval.user_id)
        await bot.send(fake.dm("and now?"))
        await fake.until(
            lambda: len(fake.messages.get(DM_CHANNEL, [])) == 4, "a new pairing code", 5.0
        )

    assert len(provider.requests) == 1
    assert provider.requests[0].messages[-1].text == "now?"
    assert "pairing code" in fake.messages[DM_CHANNEL][3].text


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_slack_pairing_text_names_a_command_slack_passes_and_both_forms_approve(
    fake_slack: FakeSlack, store: SqlStore, mode: str
) -> None:
    fake = fake_slack
    provider = ScriptedProvider([text_reply("welcome, Alice"), text_reply("welcome, Carol")])
    admin_dm = "D0BOB"
    policy = product_policy(admins=frozenset({f"slack:{BOB}"}))
    async with slack_helpers.serving(
        fake, store, provider, policy=policy, mode="socket" if mode == "socket" else "http"
    ) as bot:
        await bot.send(fake.dm("hello"))
        first = await slack_helpers.reply_containing(fake, DM_CHANNEL, "pairing code")
        code = code_in(first.text)
        # A message starting with `!` reaches the bot as it is (one with `/` would not).
        await bot.send(fake.dm(f"!approve {code}", user=BOB, channel=admin_dm))
        approved = await slack_helpers.reply_containing(fake, admin_dm, "Approved")
        await bot.send(fake.dm("thanks"))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "welcome, Alice")

        # With the manifest's slash commands installed, `/approve CODE` works too.
        await bot.send(fake.dm("me too", user=CAROL, channel="D0CAROL"))
        other = code_in(
            (await slack_helpers.reply_containing(fake, "D0CAROL", "pairing code")).text
        )
        await bot.command(fake.slash_command("/approve", other, user=BOB, channel=admin_dm))
        await slack_helpers.reply_containing(fake, admin_dm, f"Approved {CAROL}")
        await bot.send(fake.dm("thanks!", user=CAROL, channel="D0CAROL"))
        await slack_helpers.reply_containing(fake, "D0CAROL", "welcome, Carol")
        # A person who is no admin is told so, by either form.
        await bot.command(fake.slash_command("/deny", "ABCDEFGH", channel=DM_CHANNEL))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "Only an admin")

    assert f"`!approve {code}`" in first.text
    assert "`/approve" not in first.text
    assert f"slack user {ALICE}" in approved.text
    assert await Pairing(store).pending() == []
    assert len(provider.requests) == 2
