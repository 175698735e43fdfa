"""Sessions that start afresh by themselves (`[sessions] reset_idle`, `reset_at`).

Whether a session is over is a pure function of fixed datetimes; the worker test runs two
messages through the real turn path with a store whose clock stands nine hours back, so the
first message's session looks nine hours idle to the second (no waiting).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.backends.sql.store import SqlStore, sqlite_url
from core.clock import utc_now
from core.providers.scripted import text_reply
from core.session_reset import SessionReset
from tests.backends.memory_bus import MemoryBus
from tests.unit.test_worker import TERMINAL, make_worker, message, running
from tests.workers import Outbox, hand_in

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def test_idle_past_the_duration_is_due_and_not_before() -> None:
    reset = SessionReset.model_validate({"reset_idle": "8h"})

    assert reset.reset_idle == timedelta(hours=8)
    assert reset.due(NOON - timedelta(hours=8), NOON)
    assert not reset.due(NOON - timedelta(hours=7, minutes=59), NOON)


def test_the_reset_hour_ends_sessions_last_active_before_it() -> None:
    reset = SessionReset.model_validate({"reset_at": "04:00"})

    assert reset.reset_at == time(4, 0)
    # At noon the latest 04:00 was this morning.
    assert reset.due(datetime(2026, 3, 14, 3, 59, tzinfo=UTC), NOON)
    assert not reset.due(datetime(2026, 3, 14, 4, 0, tzinfo=UTC), NOON)
    # At 02:00 it was yesterday's.
    two = datetime(2026, 3, 15, 2, 0, tzinfo=UTC)
    assert not reset.due(datetime(2026, 3, 14, 23, 0, tzinfo=UTC), two)
    assert reset.due(datetime(2026, 3, 14, 3, 0, tzinfo=UTC), two)


def test_the_reset_hour_is_read_in_the_timezone() -> None:
    # 04:00 in Tokyo is 19:00 UTC the day before.
    reset = SessionReset.model_validate({"reset_at": "04:00", "timezone": "Asia/Tokyo"})

    assert reset.due(datetime(2026, 3, 13, 18, 59, tzinfo=UTC), NOON)
    assert not reset.due(datetime(2026, 3, 13, 19, 0, tzinfo=UTC), NOON)


def test_without_settings_nothing_is_ever_due() -> None:
    reset = SessionReset()

    assert not reset.enabled
    assert not reset.due(NOON - timedelta(days=300), NOON)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"reset_idle": "soon"}, "is not a duration"),
        ({"reset_at": "4 o'clock"}, "is not a time of day"),
        ({"timezone": "Mars/Olympus"}, "unknown timezone"),
        ({"reset_every": "8h"}, "Extra inputs"),
    ],
)
def test_bad_settings_say_what_is_wrong(table: dict[str, str], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        SessionReset.model_validate(table)


class BackClock:
    """The store's clock, standing `behind` before the real time."""

    def __init__(self, behind: timedelta) -> None:
        self.behind = behind

    def __call__(self) -> datetime:
        return utc_now() - self.behind


@pytest.fixture
async def old_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(
        sqlite_url(tmp_path / "old.db"), clock=BackClock(timedelta(hours=9))
    )
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def two_messages(bus: MemoryBus, store: SqlStore, reset_idle: str) -> list[list[str]]:
    """The texts the model was sent for each of two messages, with `reset_idle`."""
    worker, provider = make_worker(
        bus,
        store,
        [text_reply("first answer"), text_reply("second answer")],
        session_reset=SessionReset.model_validate({"reset_idle": reset_idle}),
    )
    outbox = Outbox(bus)
    async with running(worker):
        for text in ("my name is Ana", "what is my name?"):
            inbound = message(text)
            await hand_in(worker, inbound)
            await outbox.turn_of(inbound)
    return [[m.text for m in request.messages] for request in provider.requests]


async def test_a_message_after_the_idle_time_starts_a_new_session_and_keeps_the_old(
    bus: MemoryBus, old_store: SqlStore
) -> None:
    sent = await two_messages(bus, old_store, "8h")

    assert sent == [["my name is Ana"], ["what is my name?"]]
    current = await old_store.current_session(TERMINAL.session_key)
    assert [m.text for m in await old_store.list_messages(current.id)] == [
        "what is my name?",
        "second answer",
    ]
    # The first conversation is kept, as `/new` keeps it.
    kept = [s for s in await old_store.list_sessions() if s.id != current.id]
    assert [[m.text for m in await old_store.list_messages(s.id)] for s in kept] == [
        ["my name is Ana", "first answer"]
    ]


async def test_a_message_within_the_idle_time_stays_in_its_session(
    bus: MemoryBus, old_store: SqlStore
) -> None:
    first = await old_store.current_session(TERMINAL.session_key)

    sent = await two_messages(bus, old_store, "10h")

    assert sent[1] == ["my name is Ana", "first answer", "what is my name?"]
    assert (await old_store.current_session(TERMINAL.session_key)).id == first.id
