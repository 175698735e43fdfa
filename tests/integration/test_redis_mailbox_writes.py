"""The round trips of `RedisMailboxes`' operations, against a real redis-server.

An operation that needs several commands sends them as one explicit pipeline (the set of
sessions with work lives in another cluster slot than a session's keys, so it cannot join the
session's script). Writes are counted by wrapping redis-py's connection write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from core.backends.redis.client import redis_client
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.envelopes import Address, Inbound
from tests.integration.redis_writes import count_writes


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    shared = redis_client(redis_url)
    yield shared
    await shared.aclose()


def _inbound(chat: str, text: str) -> Inbound:
    return Inbound(address=Address(platform="telegram", chat=chat), user_id=chat, text=text)


async def test_a_put_and_a_forget_each_leave_in_one_write(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailboxes = RedisMailboxes(client, keys=RedisKeys("one-write"))
    first = _inbound("8", "a")
    assert await mailboxes.waiting() == 0  # a connection made (its handshake not counted)
    writes = count_writes(monkeypatch)

    # The box, the set of sessions with work and the wake, in one write.
    await mailboxes.put(first)
    assert len(writes) == 1
    assert await mailboxes.woken(1) == first.session_key

    writes.clear()
    # The set of sessions with work left, and the box looked at, in one write.
    assert await mailboxes.forget(_inbound("12", "never put").session_key) == 0
    assert len(writes) == 1


async def test_a_claim_after_redis_lost_its_scripts_loads_them_and_claims(
    client: aioredis.Redis,
) -> None:
    mailboxes = RedisMailboxes(client, keys=RedisKeys("lost-scripts"))
    first, second = _inbound("10", "a"), _inbound("11", "b")
    await mailboxes.put(first)
    warm = await mailboxes.claim(first.session_key, owner="w1")
    assert warm is not None
    await client.script_flush()  # as after a restart: Redis no longer knows the script

    await mailboxes.put(second)
    claim = await mailboxes.claim(second.session_key, owner="w1")

    assert claim is not None
    head = await claim.head()
    assert head is not None and head.id == second.id
    await claim.release()
    await warm.release()
