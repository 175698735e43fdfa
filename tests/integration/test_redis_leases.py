"""Leases after Redis lost them (restarted empty): their holder takes them again.

Against the test's real `redis-server`; the lease key is deleted by hand, as an empty restart
would, and the holder's next renewal (a third of the lease) is awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.clock import utc_now
from core.envelopes import Address, Inbound
from core.leader import Leadership

KEYS = RedisKeys("leases")
SESSION_KEY = "telegram:bot:7"
LEASE = 0.3
PATIENCE = 5.0


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def until_held(raw: aioredis.Redis, key: str, lost: asyncio.Event) -> bytes | str:
    """The lease's holder once the key exists again (fails if the holder gave it up)."""
    async with asyncio.timeout(PATIENCE):
        while (token := await raw.get(key)) is None:
            assert not lost.is_set()
            await asyncio.sleep(LEASE / 6)  # the renewal runs in this loop, every LEASE / 3
    return token


async def test_a_turn_lease_redis_lost_is_taken_again_by_its_holder(raw: aioredis.Redis) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=LEASE)
    claim = await mailboxes.claim(SESSION_KEY, owner="worker-a")
    assert claim is not None
    key = KEYS.turn_lease(SESSION_KEY)
    token = await raw.get(key)
    try:
        await raw.delete(key)  # Redis restarted empty

        assert await until_held(raw, key, claim.lost) == token
        assert not claim.lost.is_set()
    finally:
        await claim.release()


async def test_a_turn_lease_someone_else_took_is_lost(raw: aioredis.Redis) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=LEASE)
    claim = await mailboxes.claim(SESSION_KEY, owner="worker-a")
    assert claim is not None
    await raw.set(KEYS.turn_lease(SESSION_KEY), b"worker-b:other")

    await asyncio.wait_for(claim.lost.wait(), PATIENCE)
    await claim.release()


async def test_the_poller_lease_redis_lost_is_taken_again_by_its_holder(
    raw: aioredis.Redis,
) -> None:
    leadership = Leadership(raw, "telegram-poller:1", owner="gateway-a", keys=KEYS, ttl=LEASE)
    await leadership.acquire()
    key = KEYS.lease("telegram-poller:1")
    token = await raw.get(key)
    try:
        await raw.delete(key)  # Redis restarted empty

        assert await until_held(raw, key, leadership.lost) == token
        assert not leadership.lost.is_set()
    finally:
        await leadership.release()


async def test_done_with_the_last_item_releases_the_lease_for_good(raw: aioredis.Redis) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=LEASE)
    said = Inbound(
        id="m1",
        address=Address(platform="telegram", bot="bot", chat="7"),
        user_id="7",
        text="hi",
        received_at=utc_now(),
    )
    await mailboxes.put(said)
    claim = await mailboxes.claim(said.session_key, owner="worker-a")
    assert claim is not None
    key = KEYS.turn_lease(said.session_key)
    head = await claim.head()
    assert head is not None and head.id == "m1"

    await claim.done(head)

    # Released in the same script: another worker may claim at once, nothing is pending.
    assert await raw.get(key) is None
    assert said.session_key not in await mailboxes.pending()
    # A renewal that was still on its way does not take the lease again.
    renewed = await mailboxes.script_renew(
        keys=[key, KEYS.claim_epoch(said.session_key)],
        args=[b"whatever", int(LEASE * 1000), claim.fence.epoch],
    )
    assert renewed == 0
    assert await raw.get(key) is None
    assert await claim.release() is False
    other = await mailboxes.claim(said.session_key, owner="worker-b")
    assert other is not None and other.fence.epoch > claim.fence.epoch
    await other.release()


async def test_a_claim_sent_again_with_its_token_is_the_same_claim(raw: aioredis.Redis) -> None:
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=LEASE)
    keys = [
        KEYS.turn_lease("again"),
        KEYS.claim_epoch("again"),
        KEYS.mailbox("again"),
    ]
    first = await mailboxes.script_claim(keys=keys, args=["worker-a:token", 30_000])
    # Its answer lost to a dropped connection, redis-py sends the script again.
    again = await mailboxes.script_claim(keys=keys, args=["worker-a:token", 30_000])
    other = await mailboxes.script_claim(keys=keys, args=["worker-b:token", 30_000])

    assert first[0] > 0
    assert again[0] == first[0]
    assert other == [0]
    await raw.delete(*keys)


async def test_work_put_while_its_holder_empties_the_box_keeps_the_session_waiting(
    raw: aioredis.Redis,
) -> None:
    # The holder's `done` found the box empty and let go of the lease; a put wrote the box
    # before the holder took the session out of the set of sessions with work.
    mailboxes = RedisMailboxes(raw, keys=KEYS, lease_seconds=30.0)
    late = Inbound(address=Address(platform="telegram", chat="9"), user_id="u", text="late")
    await raw.zadd(KEYS.mailbox(late.session_key), {b"late work": 1.0})
    await raw.sadd(KEYS.mailboxes(), late.session_key)

    assert await mailboxes.forget(late.session_key) == 1
    assert await mailboxes.pending() == [late.session_key]
    await raw.delete(KEYS.mailbox(late.session_key))
    assert await mailboxes.forget(late.session_key) == 0
    assert await mailboxes.pending() == []
