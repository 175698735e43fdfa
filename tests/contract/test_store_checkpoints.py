"""The checkpoints contract (`CheckpointStore`).

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.errors import StoreError
from core.store import (
    CheckpointStore,
)
from tests.contract.store_support import START, is_utc


def _checkpoint(number: int, *, started: datetime = START, **changes: object) -> Checkpoint:
    inbound = Inbound(
        address=Address(platform="telegram", bot="b", chat="c1"),
        user_id="u1",
        text=f"question {number}",
        platform_message_id=str(number),
        received_at=started,
    )
    base = Checkpoint(
        run_key=inbound.dedupe_key,
        session_id="sess",
        inbound=inbound,
        started_at=started,
        updated_at=started,
    )
    return base.model_copy(update=changes)


async def test_a_saved_checkpoint_reads_back_and_a_save_replaces_it(store: CheckpointStore) -> None:
    first = _checkpoint(1)
    await store.save_checkpoint(first)
    assert await store.get_checkpoint(first.run_key) == first
    assert await store.get_checkpoint("nosuchrun") is None

    bumped = first.model_copy(update={"tool_rounds": 2, "updated_at": START + timedelta(1)})
    await store.save_checkpoint(bumped)
    await store.save_checkpoint(bumped)

    found = await store.get_checkpoint(first.run_key)
    assert found == bumped
    assert found is not None and is_utc(found.updated_at)
    assert found.inbound.text == "question 1"


async def test_incomplete_checkpoints_are_the_running_ones_oldest_first(
    store: CheckpointStore,
) -> None:
    later = _checkpoint(1, started=START + timedelta(minutes=5))
    earlier = _checkpoint(2, started=START)
    done = _checkpoint(3, started=START)
    for checkpoint in (later, earlier, done):
        await store.save_checkpoint(checkpoint)

    assert await store.finish_checkpoint(done.run_key, "completed")
    assert not await store.finish_checkpoint("nosuchrun", "abandoned")

    assert [c.run_key for c in await store.incomplete_checkpoints()] == [
        earlier.run_key,
        later.run_key,
    ]
    finished = await store.get_checkpoint(done.run_key)
    assert finished is not None and finished.status == "completed"


async def test_incomplete_checkpoints_older_than_leave_out_recent_ones(
    store: CheckpointStore,
) -> None:
    stale = _checkpoint(1, started=START)
    fresh = _checkpoint(2, started=START + timedelta(minutes=10))
    await store.save_checkpoint(stale)
    await store.save_checkpoint(fresh)

    cutoff = START + timedelta(minutes=5)
    assert [c.run_key for c in await store.incomplete_checkpoints(older_than=cutoff)] == [
        stale.run_key
    ]
    assert await store.incomplete_checkpoints(older_than=START) == []
    with pytest.raises(StoreError):
        await store.incomplete_checkpoints(older_than=cutoff.replace(tzinfo=None))


async def test_an_abandoned_checkpoint_is_no_longer_incomplete(store: CheckpointStore) -> None:
    checkpoint = _checkpoint(1)
    await store.save_checkpoint(checkpoint)

    assert await store.finish_checkpoint(checkpoint.run_key, "abandoned")

    assert await store.incomplete_checkpoints() == []
    found = await store.get_checkpoint(checkpoint.run_key)
    assert found is not None and found.status == "abandoned"


async def test_a_checkpoint_with_a_naive_time_is_refused(store: CheckpointStore) -> None:
    with pytest.raises(StoreError):
        await store.save_checkpoint(_checkpoint(1, updated_at=START.replace(tzinfo=None)))
    assert await store.incomplete_checkpoints() == []
