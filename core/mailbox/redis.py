"""`RedisMailboxes`: per-session mailboxes and turn leases in Redis, shared by every worker.

A mailbox is a sorted set of encoded `Inbound`s scored by the time the gateway received them,
so turns run in arrival order whichever worker took them off the bus. The claim on a session
is a lease (`SET NX PX` holding a random token) renewed while turns run; removing a finished
item checks the token atomically. Granting a lease also issues the claim's fencing epoch
(`core/fencing.py`), in the same script: the session's epoch counter, raised to at least the
server's clock in microseconds, so it outgrows every earlier epoch even after Redis lost the
counter. Whatever store the turns write to refuses writes with an overtaken epoch.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, Final

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from core.envelopes import Inbound, decode, encode
from core.errors import BusError
from core.mailbox.base import Claim, ClaimState
from core.redis_client import redis_client
from core.redis_keys import RedisKeys
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
# KEYS: lease, box; ARGV: token, member. {1, next head or nil} when removed under the lease
# (the next head saves the drain loop a read), {0} when the lease was lost.
_DONE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
redis.call('ZREM', KEYS[2], ARGV[2])
return {1, redis.call('ZRANGE', KEYS[2], 0, 0)[1]}
"""
# KEYS: lease, fence epoch counter, box; ARGV: token, ttl ms.
# Returns {epoch, head or nil} when the lease was free (the head saves the first read), {0}
# when someone holds it.
_CLAIM = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end
local now = redis.call('TIME')
local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
local epoch = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
if epoch < floor then epoch = floor end
redis.call('SET', KEYS[2], string.format('%d', epoch))
return {epoch, redis.call('ZRANGE', KEYS[3], 0, 0)[1]}
"""
# KEYS: lease; ARGV: token, ttl ms. 1 when renewed, 0 when the lease is someone else's.
# A lease that is gone (Redis restarted empty, or it lapsed with nobody taking it) is taken
# again: the turn carries on under its fencing epoch, and any later claim outgrows it.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""


# No head was read along with the last claim or done: `head()` asks Redis.
_UNREAD: Final = object()


class _RedisClaim(ClaimState):
    def __init__(
        self, mailboxes: RedisMailboxes, session_key: str, token: str, epoch: int, head: Any
    ) -> None:
        super().__init__(session_key, epoch)
        self._boxes = mailboxes
        self._token = token
        self._lease = mailboxes.keys.lease(f"turn:{session_key}")
        self._heads: dict[str, bytes] = {}
        # The head the claim or the last `done` read in the same script (None: the box was
        # empty then); used once. Work put after that read is not lost: `release` reports it.
        self._next: Any = head
        self._renewer = asyncio.create_task(self._renew_forever())

    async def head(self) -> Inbound | None:
        redis = self._boxes.client
        while True:
            found, self._next = self._next, _UNREAD
            if found is _UNREAD:
                read = await _call(redis.zrange(self._boxes.keys.mailbox(self._key), 0, 0))
                found = read[0] if read else None
            if found is None:
                return None
            raw: bytes = found
            try:
                envelope = decode(raw)
            except BusError as exc:
                log.error("dropping an unreadable mailbox entry of %s: %s", self._key, exc)
                await _call(redis.zrem(self._boxes.keys.mailbox(self._key), raw))
                continue
            if not isinstance(envelope, Inbound):
                await _call(redis.zrem(self._boxes.keys.mailbox(self._key), raw))
                continue
            self._heads[envelope.id] = raw
            return envelope

    async def done(self, inbound: Inbound) -> None:
        raw = self._heads.pop(inbound.id, None) or encode(inbound)
        removed, *head = await _call(
            self._boxes.script_done(
                keys=[self._lease, self._boxes.keys.mailbox(self._key)], args=[self._token, raw]
            )
        )
        if not removed:
            self._lost.set()
            return
        self._next = head[0] if head else None

    async def release(self) -> bool:
        await cancel_and_wait(self._renewer)
        left = await _call(
            self._boxes.script_release(
                keys=[
                    self._lease,
                    self._boxes.keys.mailbox(self._key),
                    self._boxes.keys.mailboxes(),
                ],
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

    def __init__(
        self, client: aioredis.Redis, *, keys: RedisKeys | None = None, lease_seconds: float = 30.0
    ) -> None:
        """Mailboxes in the namespace of `keys` (the default bot's when None)."""
        self.client = client
        self.keys = keys or RedisKeys()
        self.lease_seconds = lease_seconds
        self.script_release: Any = client.register_script(_RELEASE)
        self.script_done: Any = client.register_script(_DONE)
        self.script_renew: Any = client.register_script(_RENEW)
        self.script_claim: Any = client.register_script(_CLAIM)

    @classmethod
    def from_url(
        cls, url: str, *, keys: RedisKeys | None = None, lease_seconds: float = 30.0
    ) -> RedisMailboxes:
        """Mailboxes on the Redis at `url`, in the namespace of `keys`."""
        return cls(
            redis_client(url, batching=True, retry=_quick_retry()),
            keys=keys,
            lease_seconds=lease_seconds,
        )

    async def put(self, inbound: Inbound) -> None:
        """Add work in the order the gateway received it."""
        key = inbound.session_key
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zadd(self.keys.mailbox(key), {encode(inbound): inbound.received_at.timestamp()})
            pipe.sadd(self.keys.mailboxes(), key)
            await _call(pipe.execute())

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The session's lease if nobody holds it, with a new fencing epoch."""
        token = f"{owner}:{secrets.token_hex(8)}"
        ttl_ms = int(self.lease_seconds * 1000)
        epoch, *head = await _call(
            self.script_claim(
                keys=[
                    self.keys.lease(f"turn:{session_key}"),
                    self.keys.claim_epoch(session_key),
                    self.keys.mailbox(session_key),
                ],
                args=[token, ttl_ms],
            )
        )
        if not epoch:
            return None
        return _RedisClaim(self, session_key, token, int(epoch), head[0] if head else None)

    async def pending(self) -> list[str]:
        """Sessions with waiting work (held or not)."""
        members = await _call(self.client.smembers(self.keys.mailboxes()))
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
