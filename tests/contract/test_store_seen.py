"""The seen-marks contract (`SeenMarks`).

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import StoreError
from core.store import LastSeen, SeenMarks

_T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# A Discord snowflake: past 2**53, where a double would round it.
_BIG = 1_300_000_000_000_000_123


def _mark(chat: str, position: int, *, bot: str = "b1", minutes: int = 0) -> LastSeen:
    return LastSeen(
        platform="discord",
        bot=bot,
        chat=chat,
        message_id=str(position),
        position=position,
        at=_T0 + timedelta(minutes=minutes),
    )


async def test_no_marks_at_first(store: SeenMarks) -> None:
    assert await store.last_seen("discord", "b1") == []


async def test_a_mark_only_moves_forward(store: SeenMarks) -> None:
    assert await store.mark_seen(_mark("c1", _BIG)) is True
    assert await store.mark_seen(_mark("c1", _BIG - 1)) is False
    assert await store.mark_seen(_mark("c1", _BIG)) is False

    assert await store.last_seen("discord", "b1") == [_mark("c1", _BIG)]

    assert await store.mark_seen(_mark("c1", _BIG + 1, minutes=1)) is True
    assert await store.last_seen("discord", "b1") == [_mark("c1", _BIG + 1, minutes=1)]


async def test_marks_are_per_conversation_and_bot_newest_first(store: SeenMarks) -> None:
    await store.mark_seen(_mark("old", 5, minutes=1))
    await store.mark_seen(_mark("new", 3, minutes=9))
    await store.mark_seen(_mark("other-bot", 7, bot="b2"))

    listed = await store.last_seen("discord", "b1")

    assert [m.chat for m in listed] == ["new", "old"]
    assert [m.chat for m in await store.last_seen("discord", "b2")] == ["other-bot"]
    assert await store.last_seen("slack", "b1") == []


async def test_concurrent_marks_keep_the_newest(store: SeenMarks) -> None:
    await asyncio.gather(*(store.mark_seen(_mark("c", _BIG + n)) for n in (3, 9, 1, 7)))

    assert [m.position for m in await store.last_seen("discord", "b1")] == [_BIG + 9]


async def test_a_naive_time_is_refused(store: SeenMarks) -> None:
    naive = _mark("c", 1).model_copy(update={"at": datetime(2026, 3, 1)})  # noqa: DTZ001

    with pytest.raises(StoreError):
        await store.mark_seen(naive)
