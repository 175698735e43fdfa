"""Who may manage a schedule, and the limits on how often and how many (over a real store)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Address
from core.errors import ConfigError, ToolError
from core.profile import Profile
from core.scheduling.book import ScheduleBook
from core.scheduling.cadence import make_cron
from core.scheduling.commands import cancel_schedule, list_chat_schedules
from core.scheduling.models import Cadence, IntervalCadence, OnceCadence, Schedule
from core.scheduling.rules import ScheduleLimits, ScheduleRefused, may_manage, shortest_gap
from core.scheduling.tools import schedule_tools
from core.tools import ToolContext

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
CHAT = Address(platform="slack", chat="C0123ABCD")
OTHER_CHAT = Address(platform="slack", chat="C0999")
ALICE, BOB = "slack:U1", "slack:U2"


def every(seconds: int) -> IntervalCadence:
    return IntervalCadence(seconds=seconds, start=T0)


@pytest.fixture
async def book(tmp_path: Path) -> AsyncIterator[ScheduleBook]:
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"), clock=lambda: T0)
    try:
        yield ScheduleBook(
            store, clock=lambda: T0, limits=ScheduleLimits(max_per_person=2, max_per_chat=3)
        )
    finally:
        await store.close()


async def make(book: ScheduleBook, owner: str, chat: Address = CHAT, prompt: str = "p") -> Schedule:
    return await book.create(cadence=every(3600), prompt=prompt, deliver_to=chat, owner=owner)


async def admit(book: ScheduleBook, cadence: Cadence, owner: str, *, admin: bool = False) -> None:
    await book.limits.admit(
        book.store, cadence=cadence, owner=owner, deliver_to=CHAT, is_admin=admin, now=T0
    )


def test_the_owner_or_an_admin_may_manage_a_schedule() -> None:
    made = Schedule(
        id="s1",
        cadence=every(60),
        prompt="p",
        deliver_to=CHAT,
        owner=ALICE,
        next_run_at=T0,
        created_at=T0,
        updated_at=T0,
    )
    assert may_manage(made, requester=ALICE, is_admin=False)
    assert not may_manage(made, requester=BOB, is_admin=False)
    assert may_manage(made, requester=BOB, is_admin=True)
    assert may_manage(made, requester="cli", is_admin=False) is False
    by_cli = made.model_copy(update={"owner": "cli"})
    assert may_manage(by_cli, requester="cli", is_admin=False)
    assert not may_manage(by_cli, requester=ALICE, is_admin=False)


def test_the_shortest_gap_of_each_cadence() -> None:
    assert shortest_gap(OnceCadence(at=T0 + timedelta(seconds=5)), T0) is None
    assert shortest_gap(every(90), T0) == 90
    assert shortest_gap(make_cron("*/5 * * * *"), T0) == 300
    assert shortest_gap(make_cron("0,1 9 * * *"), T0) == 60


async def test_chat_users_wait_the_minimum_interval_the_cli_and_admins_ten_seconds(
    book: ScheduleBook,
) -> None:
    with pytest.raises(ScheduleRefused, match="runs would be 1 minute apart; the shortest"):
        await admit(book, every(60), ALICE)
    with pytest.raises(ScheduleRefused, match="shortest allowed is 5 minutes"):
        await admit(book, make_cron("* * * * *"), ALICE)
    await admit(book, every(300), ALICE)
    await admit(book, OnceCadence(at=T0 + timedelta(seconds=30)), ALICE)  # a one-off: no gap
    await admit(book, every(10), "cli")
    await admit(book, every(30), BOB, admin=True)
    with pytest.raises(ScheduleRefused, match="9 seconds apart; the shortest allowed is 10"):
        await admit(book, every(9), "cli")


async def test_a_person_and_a_chat_have_a_maximum(book: ScheduleBook) -> None:
    await make(book, ALICE)
    await make(book, ALICE)
    with pytest.raises(ScheduleRefused, match="you already have 2 active schedules"):
        await admit(book, every(3600), ALICE)
    await make(book, "cli")
    with pytest.raises(ScheduleRefused, match="this chat already has 3 active schedules"):
        await admit(book, every(3600), BOB)
    # Paused ones do not count; admins and the operator are not counted against.
    await book.set_status((await book.store.list_schedules(owner=ALICE))[0].id, "paused")
    await admit(book, every(3600), ALICE)
    await admit(book, every(3600), BOB, admin=True)
    await admit(book, every(3600), "cli")


def tool_context(user: str, *, admin: bool = False, chat: Address = CHAT) -> ToolContext:
    platform, _, user_id = user.partition(":")
    return ToolContext(
        session_id="s",
        user_id=user_id,
        platform=platform,
        address=chat,
        is_admin=admin,
        clock=lambda: T0,
    )


async def run_tool(book: ScheduleBook, name: str, args: dict[str, object], ctx: ToolContext) -> str:
    (tool,) = [t for t in schedule_tools(book) if t.name == name]
    return await tool(args, ctx)


async def test_the_tools_show_prompts_and_allow_cancelling_only_to_the_owner_or_an_admin(
    book: ScheduleBook,
) -> None:
    hers = await make(book, ALICE, prompt="water the plants")
    ops = await make(book, "cli", prompt="deploy checklist")

    seen_by_bob = await run_tool(book, "schedule_list", {}, tool_context(BOB))
    assert hers.id in seen_by_bob and ops.id in seen_by_bob
    assert "plants" not in seen_by_bob and "deploy" not in seen_by_bob
    seen_by_alice = await run_tool(book, "schedule_list", {}, tool_context(ALICE))
    assert "water the plants" in seen_by_alice and "deploy" not in seen_by_alice
    assert "deploy checklist" in await run_tool(
        book, "schedule_list", {}, tool_context(BOB, admin=True)
    )

    for who, target in ((BOB, hers), (ALICE, ops)):
        with pytest.raises(ToolError, match="belongs to someone else"):
            await run_tool(book, "schedule_cancel", {"schedule_id": target.id}, tool_context(who))
        with pytest.raises(ToolError, match="belongs to someone else"):
            await run_tool(book, "schedule_runs", {"schedule_id": target.id}, tool_context(who))
    assert len(await book.store.list_schedules()) == 2

    await run_tool(book, "schedule_cancel", {"schedule_id": hers.id}, tool_context(ALICE))
    await run_tool(book, "schedule_cancel", {"schedule_id": ops.id}, tool_context(BOB, admin=True))
    assert await book.store.list_schedules() == []


async def test_the_create_tool_applies_the_limits(book: ScheduleBook) -> None:
    with pytest.raises(ToolError, match="Cannot schedule that: runs would be 1 minute apart"):
        await run_tool(book, "schedule_create", {"prompt": "x", "every": "1m"}, tool_context(BOB))
    made = await run_tool(
        book, "schedule_create", {"prompt": "x", "every": "1m"}, tool_context(BOB, admin=True)
    )
    assert made.startswith("Scheduled ")


async def test_a_paused_schedule_shows_no_next_run(book: ScheduleBook) -> None:
    made = await make(book, ALICE)
    await book.set_status(made.id, "paused")
    listed = await run_tool(book, "schedule_list", {}, tool_context(ALICE))
    assert f"{made.id}: every 1h, paused, next none" in listed
    runs = await run_tool(book, "schedule_runs", {"schedule_id": made.id}, tool_context(ALICE))
    assert runs == f"Schedule {made.id} has not run yet; it is paused."


async def test_the_runs_tool_says_why_a_schedule_is_not_running(book: ScheduleBook) -> None:
    made = await make(book, ALICE)
    await book.store.save_schedule(
        made.model_copy(
            update={"status": "disabled", "status_reason": "5 runs in a row failed; last: x"}
        )
    )
    runs = await run_tool(book, "schedule_runs", {"schedule_id": made.id}, tool_context(ALICE))
    assert runs == (
        f"Schedule {made.id} has not run yet; it is disabled (5 runs in a row failed; last: x)."
    )


async def test_the_chat_commands_follow_the_same_rules(book: ScheduleBook) -> None:
    store = book.store
    hers = await make(book, ALICE, prompt="water the plants")
    elsewhere = await make(book, ALICE, chat=OTHER_CHAT)

    listed = await list_chat_schedules(store, CHAT, requester=BOB, is_admin=False)
    assert hers.id in listed and elsewhere.id not in listed and "plants" not in listed
    assert "plants" in await list_chat_schedules(store, CHAT, requester=ALICE, is_admin=False)
    assert (
        await list_chat_schedules(
            store, Address(platform="slack", chat="C7"), requester=BOB, is_admin=False
        )
        == "No schedules deliver to this chat."
    )

    assert "Say which" in await cancel_schedule(store, CHAT, " ", requester=ALICE, is_admin=False)
    assert "No schedule 'nope' in this chat" in await cancel_schedule(
        store, CHAT, "nope", requester=ALICE, is_admin=False
    )
    # Another chat's schedule is not found from here, even by its owner (unless an admin).
    assert f"No schedule {elsewhere.id!r} in this chat" in await cancel_schedule(
        store, CHAT, elsewhere.id, requester=ALICE, is_admin=False
    )
    assert "made by someone else" in await cancel_schedule(
        store, CHAT, hers.id, requester=BOB, is_admin=False
    )
    assert await cancel_schedule(store, CHAT, hers.id, requester=ALICE, is_admin=False) == (
        f"Cancelled schedule {hers.id} (every 1h)."
    )
    assert "Cancelled" in await cancel_schedule(
        store, CHAT, elsewhere.id, requester=BOB, is_admin=True
    )
    assert await store.list_schedules() == []


def test_the_profile_keys_and_their_bounds() -> None:
    defaults = Profile.parse("p", {}, source="profile.toml", identity=None).settings
    assert (
        defaults.min_schedule_interval,
        defaults.max_schedules_per_person,
        defaults.max_schedules_per_chat,
    ) == (300, 20, 50)
    with pytest.raises(ConfigError, match=r"profile\.toml: min_schedule_interval: "):
        Profile.parse("p", {"min_schedule_interval": 5}, source="profile.toml", identity=None)
