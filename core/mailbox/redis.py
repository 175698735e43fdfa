"""`RedisMailboxes`: per-session mailboxes and turn leases in Redis, shared by every worker.

A mailbox is a sorted set of encoded `Inbound`s scored by the time the gateway received them,
so turns run in arrival order whichever worker took them off the bus. The claim on a session
is a lease (`SET NX PX` holding a random token) renewed while turns run; removing a finished
item and (in the Redis store) writing messages check the token atomically, so a worker whose
lease lapsed cannot act for the session any more.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from core import redis_keys as keys
from core.envelopes import Inbound, decode, encode
from core.errors import BusError
from core.mailbox.base import Claim
from core.store.base import Fence
from core.tasks import cancel_and_wait

__all__ = ["RedisMailboxes"]

log = logging.getLogger(__name__)

# KEYS: lease, box, pending set; ARGV: token, session key. Returns what is left in the box.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local left = redis.call('ZCARD', KEYS[2])
if left == 0 then redis.call('SREM', KEYS[3], ARGV[2]) end
return left
"""
# KEYS: lease, box; ARGV: token, member. 1 when removed under the lease, 0 when it was lost.
_DONE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""
# KEYS: lease; ARGV: token, ttl ms. 1 when renewed, 0 when the lease is someone else's.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""


class _RedisClaim:
    def __init__(self, mailboxes: RedisMailboxes, session_key: str, token: str) -> None:
        self._boxes = mailboxes
        self._key = session_key
        self._token = token
        self._lease = keys.lease(f"turn:{session_key}")
        self._lost = asyncio.Event()
        self._heads: dict[str, bytes] = {}
        self._renewer = asyncio.create_task(self._renew_forever())

    @property
    def session_key(self) -> str:
        return self._key

    @property
    def fence(self) -> Fence | None:
        return Fence(lease_key=self._lease, token=self._token)

    @property
    def lost(self) -> asyncio.Event:
        return self._lost

    async def head(self) -> Inbound | None:
        redis = self._boxes.client
        while True:
            found = await _call(redis.zrange(keys.mailbox(self._key), 0, 0))
            if not found:
                return None
            raw: bytes = found[0]
            try:
                envelope = decode(raw)
            except BusError as exc:
                log.error("dropping an unreadable mailbox entry of %s: %s", self._key, exc)
                await _call(redis.zrem(keys.mailbox(self._key), raw))
                continue
            if not isinstance(envelope, Inbound):
                await _call(redis.zrem(keys.mailbox(self._key), raw))
                continue
            self._heads[envelope.id] = raw
            return envelope

    async def done(self, inbound: Inbound) -> None:
        raw = self._heads.pop(inbound.id, None) or encode(inbound)
        removed = await _call(
            self._boxes.script_done(
                keys=[self._lease, keys.mailbox(self._key)], args=[self._token, raw]
            )
        )
        if not removed:
            self._lost.set()

    async def release(self) -> bool:
        await cancel_and_wait(self._renewer)
        left = await _call(
            self._boxes.script_release(
                keys=[self._lease, keys.mailbox(self._key), keys.mailboxes()],
                args=[self._token, self._key],
            )
        )
        return int(left) > 0

    async def _renew_forever(self) -> None:
        ttl_ms = int(self._boxes.lease_seconds * 1000)
        loop = asyncio.get_running_loop()
        valid_until = loop.time() + self._boxes.lease_seconds
        while True:
            await asyncio.sleep(self._boxes.lease_seconds / 3)
            try:
                renewed = await self._boxes.script_renew(
                    keys=[self._lease], args=[self._token, ttl_ms]
                )
            except RedisError as exc:
                log.warning("could not renew the lease of %s: %s", self._key, exc)
                if loop.time() >= valid_until:
                    self._lost.set()
                    return
                continue
            if not renewed:
                log.warning("lost the lease of %s to another worker", self._key)
                self._lost.set()
                return
            valid_until = loop.time() + self._boxes.lease_seconds


class RedisMailboxes:
    """Mailboxes and turn leases in the Redis every worker shares."""

    def __init__(self, client: aioredis.Redis, *, lease_seconds: float = 30.0) -> None:
        self.client = client
        self.lease_seconds = lease_seconds
        self.script_release: Any = client.register_script(_RELEASE)
        self.script_done: Any = client.register_script(_DONE)
        self.script_renew: Any = client.register_script(_RENEW)

    @classmethod
    def from_url(cls, url: str, *, lease_seconds: float = 30.0) -> RedisMailboxes:
        """Mailboxes on the Redis at `url`."""
        return cls(aioredis.Redis.from_url(url, retry=_quick_retry()), lease_seconds=lease_seconds)

    async def put(self, inbound: Inbound) -> None:
        """Add work in the order the gateway received it."""
        key = inbound.session_key
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zadd(keys.mailbox(key), {encode(inbound): inbound.received_at.timestamp()})
            pipe.sadd(keys.mailboxes(), key)
            await _call(pipe.execute())

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The session's lease if nobody holds it."""
        token = f"{owner}:{secrets.token_hex(8)}"
        ttl_ms = int(self.lease_seconds * 1000)
        got = await _call(
            self.client.set(keys.lease(f"turn:{session_key}"), token, nx=True, px=ttl_ms)
        )
        if not got:
            return None
        return _RedisClaim(self, session_key, token)

    async def pending(self) -> list[str]:
        """Sessions with waiting work (held or not)."""
        members = await _call(self.client.smembers(keys.mailboxes()))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def _quick_retry() -> Retry:
    """Retry a dropped connection a few times, quickly.

    redis-py gives a client made by `from_url` no retries at all, so after a Redis restart the
    first command on each pooled (now dead) connection would fail. Every mailbox and lease
    command may be sent twice: each is idempotent, or at worst leaves a lease to lapse.
    """
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3)


async def _call(awaitable: Any) -> Any:
    try:
        return await awaitable
    except RedisError as exc:
        raise BusError(f"redis mailbox operation failed: {type(exc).__name__}") from exc
