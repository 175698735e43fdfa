"""Write fencing end to end: the mailbox's claims issue epochs, any store refuses overtaken ones.

A worker "stalls" here the way it does in production: its claim's lease lapses (the lease key
is removed, as its expiry would) and another worker claims the session and writes; the
stalled worker's late writes must then be refused, whichever store the turns write to. The
Redis mailboxes are combined with both stores: the fence needs no knowledge of Redis leases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore, sqlite_url
from core.errors import StoreError
from core.messages import Message
from core.store import Store
from tests.backends.memory_mailboxes import MemoryMailboxes

SESSION_KEY = "telegram:bot:42"
KEYS = RedisKeys("fencing")


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def mailboxes(raw: aioredis.Redis) -> RedisMailboxes:
    # A long lease: only the test makes it lapse.
    return RedisMailboxes(raw, keys=KEYS, lease_seconds=60)


@pytest.fixture(params=["sqlite", "sql-postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "sqlite":
        opened = await SqlStore.open(sqlite_url(tmp_path / "switchboard.db"))
    else:
        # The session's server (this async fixture cannot ask for async ones by name).
        url = await request.getfixturevalue("postgres_server").new_database()
        opened = await SqlStore.open(url)
    yield opened
    await opened.close()


async def test_each_claim_on_a_session_gets_a_larger_epoch(
    mailboxes: RedisMailboxes,
) -> None:
    epochs = []
    for _ in range(3):
        claim = await mailboxes.claim(SESSION_KEY, owner="w1")
        assert claim is not None
        assert claim.fence.session_key == SESSION_KEY
        epochs.append(claim.fence.epoch)
        await claim.release()

    assert epochs == sorted(set(epochs))


async def test_a_held_session_gives_no_second_claim(mailboxes: RedisMailboxes) -> None:
    first = await mailboxes.claim(SESSION_KEY, owner="w1")
    assert first is not None
    assert await mailboxes.claim(SESSION_KEY, owner="w2") is None
    await first.release()


async def test_epochs_keep_growing_when_redis_loses_the_counter(
    mailboxes: RedisMailboxes, raw: aioredis.Redis
) -> None:
    first = await mailboxes.claim(SESSION_KEY, owner="w1")
    assert first is not None
    await first.release()
    await raw.delete(KEYS.claim_epoch(SESSION_KEY))

    again = await mailboxes.claim(SESSION_KEY, owner="w1")
    assert again is not None
    # Floored by the server's clock: not back to 1, so a store's record still holds.
    assert again.fence.epoch >= first.fence.epoch > 1
    await again.release()


async def test_a_stalled_worker_cannot_write_after_the_next_holder_did(
    mailboxes: RedisMailboxes, raw: aioredis.Redis, store: Store
) -> None:
    session = await store.current_session(SESSION_KEY)
    stalled = await mailboxes.claim(SESSION_KEY, owner="w1")
    assert stalled is not None
    await store.append_message(session.id, Message.user("question"), fence=stalled.fence)

    # w1 stalls past its lease: the lease key lapses and w2 takes the session over.
    await raw.delete(KEYS.turn_lease(SESSION_KEY))
    taker = await mailboxes.claim(SESSION_KEY, owner="w2")
    assert taker is not None
    await store.append_message(session.id, Message.assistant("w2's answer"), fence=taker.fence)

    with pytest.raises(StoreError, match="overtaken"):
        await store.append_message(session.id, Message.assistant("w1, late"), fence=stalled.fence)

    texts = [m.text for m in await store.list_messages(session.id)]
    assert texts == ["question", "w2's answer"]
    await taker.release()
    await stalled.release()


async def test_memory_mailboxes_fence_a_released_claim_out(tmp_path: Path) -> None:
    boxes = MemoryMailboxes()
    store = await SqlStore.open(sqlite_url(tmp_path / "switchboard.db"))
    try:
        session = await store.current_session(SESSION_KEY)
        old = await boxes.claim(SESSION_KEY, owner="w")
        assert old is not None
        await old.release()
        new = await boxes.claim(SESSION_KEY, owner="w")
        assert new is not None
        assert new.fence.epoch > old.fence.epoch

        await store.append_message(session.id, Message.user("new"), fence=new.fence)
        with pytest.raises(StoreError):
            await store.append_message(session.id, Message.user("old"), fence=old.fence)
        await new.release()
    finally:
        await store.close()


async def test_a_restarted_process_outbids_the_epochs_its_store_kept(tmp_path: Path) -> None:
    """Memory mailboxes start afresh with each process; their epochs still beat the old ones."""
    store = await SqlStore.open(sqlite_url(tmp_path / "switchboard.db"))
    try:
        session = await store.current_session(SESSION_KEY)
        before = await MemoryMailboxes().claim(SESSION_KEY, owner="w")
        assert before is not None
        await store.append_message(session.id, Message.user("before"), fence=before.fence)

        after = await MemoryMailboxes().claim(SESSION_KEY, owner="w")
        assert after is not None
        stored = await store.append_message(session.id, Message.user("after"), fence=after.fence)
        assert stored.seq == 2
    finally:
        await store.close()
