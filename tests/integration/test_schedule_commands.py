"""`/schedules` and `/unschedule` in a Telegram group, through the real adapter and its fake.

Alice made one schedule in the group, the operator another with the CLI. Bob sees both
listed without their prompts and may cancel neither; Alice may cancel hers only; an admin
may cancel the operator's.
"""

from __future__ import annotations

from datetime import timedelta

from core.backends.sql.store import SqlStore
from core.clock import utc_now
from core.envelopes import Address
from core.policy import ChannelPolicy
from core.providers.demo import DemoProvider
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, Schedule
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_events import CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration import discord_helpers, telegram_helpers
from tests.integration.telegram_helpers import reply_containing

GROUP = -100123
ALICE, BOB, ADMIN = 11, 22, 99
HERE = Address(platform="telegram", chat=str(GROUP))


async def _make(store: SqlStore, owner: str, prompt: str) -> Schedule:
    return await ScheduleBook(store).create(
        cadence=IntervalCadence(seconds=3600, start=utc_now() + timedelta(hours=1)),
        prompt=prompt,
        deliver_to=HERE,
        owner=owner,
    )


async def test_group_members_list_and_cancel_by_ownership(
    fake_telegram: FakeTelegram, store: SqlStore
) -> None:
    fake = fake_telegram
    alices = await _make(store, f"telegram:{ALICE}", "remind us of the retro")
    operators = await _make(store, "cli", "secret deploy checklist")
    policy = ChannelPolicy(admins=frozenset({f"telegram:{ADMIN}"}))
    async with telegram_helpers.serving(fake, store, DemoProvider(), policy=policy):

        async def say(user: int, text: str, needle: str) -> str:
            fake.group_text(GROUP, text, user_id=user, command=True, mention=True)
            return (await reply_containing(fake, GROUP, needle)).text

        listed = await say(BOB, "/schedules", "Schedules of this chat (2)")
        assert alices.id in listed and operators.id in listed
        assert "retro" not in listed and "deploy" not in listed

        refused = await say(BOB, f"/unschedule {alices.id}", f"Schedule {alices.id} was made")
        assert "only they or an admin" in refused
        refused = await say(ALICE, f"/unschedule {operators.id}", f"Schedule {operators.id} was")
        assert await store.get_schedule(alices.id) is not None
        assert await store.get_schedule(operators.id) is not None

        await say(ALICE, f"/unschedule {alices.id}", f"Cancelled schedule {alices.id}")
        assert await store.get_schedule(alices.id) is None
        await say(ADMIN, f"/unschedule {operators.id}", f"Cancelled schedule {operators.id}")
        assert await store.get_schedule(operators.id) is None
        await say(BOB, "/schedules", "No schedules deliver to this chat.")

    # The menu every Telegram user sees lists both commands.
    assert {"schedules", "unschedule"} <= {c["command"] for c in fake.commands}


async def test_discord_asks_for_the_id_in_an_option_of_unschedule(
    fake_discord: FakeDiscord, store: SqlStore
) -> None:
    fake = fake_discord
    channel = Address(platform="discord", chat=str(CHANNEL))
    made = await ScheduleBook(store).create(
        cadence=IntervalCadence(seconds=3600, start=utc_now() + timedelta(hours=1)),
        prompt="weekly report",
        deliver_to=channel,
        owner="discord:42",
    )
    async with discord_helpers.serving(fake, store, DemoProvider()):
        (registered,) = [c for c in fake.commands if c["name"] == "unschedule"]
        assert [(o["name"], o.get("required", True)) for o in registered["options"]] == [
            ("id", True)
        ]
        fake.slash("schedules", channel_id=CHANNEL, user_id=42)
        await discord_helpers.reply_containing(fake, CHANNEL, "weekly report")
        fake.slash("unschedule", channel_id=CHANNEL, user_id=42, options={"id": made.id})
        await discord_helpers.reply_containing(fake, CHANNEL, f"Cancelled schedule {made.id}")
    assert await store.get_schedule(made.id) is None
