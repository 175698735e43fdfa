"""A turn lease is never held by two workers: its holder gives it up before Redis can.

Against real `redis-server`s. The first test stops a server of its own under a claim (the
holder's renewals then get no answer): the claim must be lost before Redis would expire the
key, or another worker could claim the session while the holder still runs its turn. The
others delete keys by hand, as a lapse or an empty restart would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.envelopes import Address, Inbound
from tests.redis_server import RedisServer

KEYS = RedisKeys("lapse")
SESSION_KEY = "telegram:bot:9"
PATIENCE = 5.0


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def test_a_holder_redis_stops_answering_loses_its_claim_before_the_lease_can_lapse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lease = 2.0
    server = RedisServer(tmp_path / "redis")
    await asyncio.to_thread(server.start)
    mailboxes = RedisMailboxes.from_url(server.url, keys=KEYS, lease_seconds=lease)
    try:
        claim = await mailboxes.claim(SESSION_KEY, owner="worker-a")
        assert claim is not None
        await asyncio.to_thread(server.stop)

        await asyncio.wait_for(claim.lost.wait(), PATIENCE)
        # Lost at its own deadline (counted from before the request that set the key, so
        # before Redis can expire it), not after a renewal failed: a renewal's retries take
        # longer than the lease.
        assert "Redis did not renew it in time" in caplog.text, caplog.text
    finally:
        await asyncio.to_thread(server.stop)
        await mailboxes.aclose()


async def test_a_lapsed_lease_another_worker_claimed_meanwhile_is_not_taken_again(
    raw: aioredis.Redis,
) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=0.3)
    stale = await mailboxes.claim(SESSION_KEY, owner="worker-a")
    assert stale is not None
    lease_key = KEYS.turn_lease(SESSION_KEY)
    await raw.delete(lease_key)  # lapsed while worker-a was slow
    newer = await mailboxes.claim(SESSION_KEY, owner="worker-b")
    assert newer is not None and newer.fence.epoch > stale.fence.epoch
    await newer.release()  # worker-b finished before worker-a tried to renew

    await asyncio.wait_for(stale.lost.wait(), PATIENCE)
    assert await raw.get(lease_key) is None
    await stale.release()


async def test_a_lease_and_epoch_redis_lost_are_taken_again_by_their_holder(
    raw: aioredis.Redis,
) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=0.3)
    claim = await mailboxes.claim(SESSION_KEY, owner="worker-a")
    assert claim is not None
    lease_key, epoch_key = KEYS.turn_lease(SESSION_KEY), KEYS.claim_epoch(SESSION_KEY)
    token = await raw.get(lease_key)
    try:
        await raw.delete(lease_key, epoch_key)  # Redis restarted empty

        async with asyncio.timeout(PATIENCE):
            while await raw.get(lease_key) is None:
                assert not claim.lost.is_set()
                await asyncio.sleep(0.05)  # the holder renews every 0.1 s in this loop
        assert await raw.get(lease_key) == token
        # The counter is back, so the next claim's epoch still outgrows this one's.
        restored = await raw.get(epoch_key)
        assert restored is not None and int(restored) == claim.fence.epoch
        assert not claim.lost.is_set()
    finally:
        await claim.release()
    after = await mailboxes.claim(SESSION_KEY, owner="worker-b")
    assert after is not None and after.fence.epoch > claim.fence.epoch
    await after.release()


async def test_a_dead_holders_mailbox_is_left_to_it_until_its_lease_lapses(
    raw: aioredis.Redis,
) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=0.3)
    waiting = Inbound(address=Address(platform="telegram", bot="bot", chat="9"), user_id="9")
    await mailboxes.put(waiting)
    lease_key = KEYS.turn_lease(waiting.session_key)
    # A worker claimed the session and died: its lease is still there, renewed by nobody.
    await raw.set(lease_key, "worker-a:0123456789abcdef", px=60_000)
    assert await mailboxes.pending() == []

    await raw.delete(lease_key)  # lapsed
    assert await mailboxes.pending() == [waiting.session_key]
    claim = await mailboxes.claim(waiting.session_key, owner="worker-b")
    assert claim is not None
    head = await claim.head()
    assert head is not None and head.id == waiting.id
    await claim.done(head)
    assert await claim.release() is False
    assert await mailboxes.pending() == []
