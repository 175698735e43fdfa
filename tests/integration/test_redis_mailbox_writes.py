"""The round trips of `RedisMailboxes`' operations, against a real redis-server.

An operation that needs several commands sends them as one explicit pipeline (the set of
sessions with work lives in another cluster slot than a session's keys, so it cannot join the
session's script). Writes are counted by wrapping redis-py's connection write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from core.envelopes import Address, Inbound
from core.mailbox.redis import RedisMailboxes
from core.redis_client import redis_client
from core.redis_keys import RedisKeys
from tests.integration.redis_writes import count_writes


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    shared = redis_client(redis_url)
    yield shared
    await shared.aclose()


def _inbound(chat: str, text: str) -> Inbound:
    return Inbound(address=Address(platform="telegram", chat=chat), user_id=chat, text=text)


async def test_a_put_a_put_and_claim_and_a_forget_each_leave_in_one_write(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailboxes = RedisMailboxes(client, keys=RedisKeys("one-write"))
    first, second = _inbound("8", "a"), _inbound("9", "b")
    warm = await mailboxes.put_and_claim(first, owner="w1")  # its script loaded, if new
    assert warm is not None
    writes = count_writes(monkeypatch)

    await mailboxes.put(first)
    assert len(writes) == 1
    claim = await mailboxes.put_and_claim(second, owner="w1")
    assert claim is not None and len(writes) == 2
    assert await mailboxes.pending() == []  # both held

    await claim.release()
    await warm.release()
    writes.clear()
    # The set of sessions with work left, and the box looked at, in one write.
    assert await mailboxes.forget(_inbound("12", "never put").session_key) == 0
    assert len(writes) == 1


async def test_a_put_and_claim_after_redis_lost_its_scripts_loads_them_and_claims(
    client: aioredis.Redis,
) -> None:
    mailboxes = RedisMailboxes(client, keys=RedisKeys("lost-scripts"))
    first, second = _inbound("10", "a"), _inbound("11", "b")
    warm = await mailboxes.put_and_claim(first, owner="w1")
    assert warm is not None
    await client.script_flush()  # as after a restart: Redis no longer knows the script

    claim = await mailboxes.put_and_claim(second, owner="w1")

    assert claim is not None
    assert sorted(await client.smembers(mailboxes.keys.mailboxes())) == sorted(
        [first.session_key.encode(), second.session_key.encode()]
    )
    await claim.release()
    await warm.release()
