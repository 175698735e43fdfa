"""Catch-up after downtime, the shared part: the late note and when seen marks are written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from channels.catchup import CatchUp, LateMessages, SeenLog, late_note, with_late_note
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound

_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age", "note"),
    [
        (timedelta(minutes=4, seconds=59), None),
        (timedelta(minutes=5), "(sent 5 min ago, while I was offline)"),
        (timedelta(hours=2, minutes=59), "(sent 2 h ago, while I was offline)"),
        (timedelta(hours=47), "(sent 47 h ago, while I was offline)"),
        (timedelta(days=3, hours=1), "(sent 3 days ago, while I was offline)"),
    ],
)
def test_a_late_note_says_how_late(age: timedelta, note: str | None) -> None:
    assert late_note(_NOW - age, _NOW) == note


def test_zero_turns_catch_up_off() -> None:
    assert CatchUp().enabled
    assert not CatchUp(hours=0).enabled
    assert not CatchUp(messages=0).enabled
    assert CatchUp(hours=24).since(_NOW) == _NOW - timedelta(days=1)


def test_late_messages_are_answered_within_the_window_and_the_cap_per_conversation() -> None:
    late = LateMessages(CatchUp(hours=24, messages=2))
    hour = timedelta(hours=1)
    assert not late.admits("a", _NOW - 25 * hour, _NOW)  # older than the window
    assert [late.admits("a", _NOW - n * hour, _NOW) for n in (3, 2, 1)] == [True, True, False]
    assert late.admits("b", _NOW - hour, _NOW)  # another conversation has its own cap
    assert late.admits("a", _NOW, _NOW)  # on time: always, and the backlog is over
    assert late.admits("a", _NOW - hour, _NOW)
    assert not LateMessages(CatchUp(hours=0)).admits("a", _NOW - hour, _NOW)


def test_the_late_note_goes_before_a_message_but_not_a_command() -> None:
    address = Address(platform="telegram", chat="1")
    message = Inbound(address=address, text="hello")
    command = Inbound(kind="command", command="new", address=address, text="/new")
    noted = with_late_note(message, _NOW - timedelta(hours=2), _NOW)
    assert noted.text == "(sent 2 h ago, while I was offline)\nhello"
    assert with_late_note(message, _NOW, _NOW) is message
    assert with_late_note(command, _NOW - timedelta(hours=2), _NOW) is command


async def test_marks_are_written_at_flush_newest_only(store: SqlStore) -> None:
    seen = SeenLog(store, "discord")
    seen.note("b", "c", "5", 5, _NOW)
    seen.note("b", "c", "3", 3, _NOW)  # older: a late note of an earlier message
    await seen.flush()

    [mark] = await store.last_seen("discord", "b")
    assert mark.position == 5


async def test_a_catch_up_holds_marks_back_and_an_unfinished_one_drops_them(
    store: SqlStore,
) -> None:
    seen = SeenLog(store, "discord")
    seen.note("b", "c", "5", 5, _NOW)
    seen.hold()
    seen.note("b", "c", "9", 9, _NOW)  # live, while missed messages are not read yet
    await seen.flush()
    assert await store.last_seen("discord", "b") == []

    # Where the catch-up starts: what was noted before the hold.
    [start] = await seen.begin_catch_up("b")
    assert start.position == 5

    seen.end_catch_up(complete=False)
    await seen.flush()
    [mark] = await store.last_seen("discord", "b")
    assert mark.position == 5  # the next start reads from 5 again


async def test_a_finished_catch_up_writes_the_marks_noted_during_it(store: SqlStore) -> None:
    seen = SeenLog(store, "slack")
    seen.hold()
    seen.note("b", "c", "9", 9, _NOW)
    seen.end_catch_up(complete=True)
    await seen.flush()

    [mark] = await store.last_seen("slack", "b")
    assert mark.position == 9
