"""What every store does across its lifetime: records outlive closing it, a closed store
refuses work, and the clock it is given is checked and read in UTC.

Run against every implementation by the `open_store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from core.errors import StoreError
from core.fencing import Fence
from core.messages import ImagePart, Message
from tests.contract.store_support import START, OpenStore, TickingClock, is_utc


def _at_start() -> datetime:
    return START


async def test_records_outlive_closing_the_store(open_store: OpenStore) -> None:
    store = await open_store(TickingClock())
    session = await store.current_session("telegram:42")
    image = ImagePart(media_type="image/png", data=b"\x89PNG\xff\x00")
    first = await store.append_message(session.id, Message.user("hi", images=[image]))
    second = await store.append_message(session.id, Message.assistant("hello"))
    await store.mark_processed("telegram:update:1")
    await store.close()

    reopened = await open_store(TickingClock(START.replace(year=2026)))
    assert (await reopened.current_session("telegram:42")).id == session.id
    assert await reopened.list_messages(session.id) == [first, second]
    assert await reopened.is_processed("telegram:update:1") is True
    assert (await reopened.append_message(session.id, Message.user("again"))).seq == 3


async def test_the_highest_fence_seen_outlives_closing_the_store(open_store: OpenStore) -> None:
    """A restarted process's store still refuses a claim that was overtaken before it."""
    store = await open_store(TickingClock())
    session = await store.current_session("telegram:42")
    await store.append_message(
        session.id, Message.user("new"), fence=Fence(session_key="telegram:42", epoch=9)
    )
    await store.close()

    reopened = await open_store(TickingClock())
    with pytest.raises(StoreError, match="overtaken"):
        await reopened.append_message(
            session.id, Message.user("old"), fence=Fence(session_key="telegram:42", epoch=8)
        )
    assert [m.text for m in await reopened.list_messages(session.id)] == ["new"]


async def test_a_closed_store_refuses_work_and_closing_again_is_harmless(
    open_store: OpenStore,
) -> None:
    store = await open_store(TickingClock())
    await store.close()
    await store.close()

    with pytest.raises(StoreError, match="closed"):
        await store.current_session("terminal")


async def test_a_naive_clock_is_refused_and_nothing_is_written(open_store: OpenStore) -> None:
    store = await open_store(lambda: START.replace(tzinfo=None))

    with pytest.raises(StoreError, match="naive"):
        await store.create_session("terminal")
    assert await store.list_sessions() == []


async def test_times_of_a_clock_in_another_zone_come_back_in_utc(open_store: OpenStore) -> None:
    plus_two = datetime.fromisoformat("2025-03-01T14:00:00+02:00")
    store = await open_store(lambda: plus_two)

    session = await store.create_session("terminal")
    found = await store.get_session(session.id)
    stored = await store.append_message(session.id, Message.user("hi"))
    [listed] = await store.list_messages(session.id)

    assert found is not None and found.created_at == START and is_utc(found.created_at)
    assert stored.created_at == listed.created_at == START and is_utc(listed.created_at)


async def test_a_new_session_is_current_even_within_the_same_instant(
    open_store: OpenStore,
) -> None:
    """With equal creation times the later-made session still wins."""
    store = await open_store(_at_start)
    old = await store.current_session("terminal")
    fresh = await store.create_session("terminal")

    assert fresh.created_at == old.created_at == START
    assert (await store.current_session("terminal")).id == fresh.id
