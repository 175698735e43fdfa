"""`RedisMailboxes`: per-session mailboxes and turn leases in Redis, shared by every worker.

A mailbox is a sorted set of encoded `Inbound`s scored by the time the gateway received them,
so turns run in arrival order whichever worker claims the session; putting an envelope twice
(a producer's retry) keeps one member. Each put also pushes the session on a list of wakes
that idle workers block on (`BLPOP`); a wake lost with its worker is made good by the sweep
(`pending`). The claim on a session
is a lease (`SET NX PX` holding a random token) renewed while turns run; removing a finished
item checks the token atomically. Granting a lease also issues the claim's fencing epoch
(`core/fencing.py`), in the same script: the session's epoch counter, raised to at least the
server's clock in microseconds, so it outgrows every earlier epoch even after Redis lost the
counter. Whatever store the turns write to refuses writes with an overtaken epoch.

A holder counts its lease as held only until `lease_seconds` (less a margin) after it *sent*
the request that last set it, and marks the claim lost at that moment even while Redis does
not answer: Redis expires the key later than that, so no other worker can claim the session
while this one still believes it holds it (an 8 s Redis outage used to let two workers run
the same turn). A lease found gone at renewal is taken again only if no claim was granted
since this one (the session's epoch counter is not above the claim's): an empty Redis lost
it, rather than another worker having claimed and released the session meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from typing import Any, Final

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from core.backends.redis.client import AnyRedis, connect_redis, is_outage
from core.backends.redis.keys import RedisKeys
from core.envelopes import Inbound, decode, encode
from core.errors import BusError, BusUnavailable
from core.mailbox.base import BEHIND_LIMIT, Claim, ClaimState, is_plain
from core.outages import Patience
from core.tasks import cancel_and_wait

__all__ = ["RedisMailboxes"]

log = logging.getLogger(__name__)

# Every script below touches the keys of one session only (its `{s:<session key>}` hash tag,
# core/backends/redis/keys.py), so each runs within one Redis Cluster slot. The set of sessions with
# work (`mailboxes`) gathers every session: it is changed by commands of its own, in an order
# that never loses a session with work (see `forget`), and read without a script (`pending`).

# KEYS: lease, box; ARGV: token. Returns what is left in the box.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('ZCARD', KEYS[2])
"""
# KEYS: lease, box, fence epoch counter; ARGV: token, member, the claim's epoch.
# {1, next head} when removed under the lease and more work waits (the head saves the drain
# loop a read); {2} when the box is now empty: the lease is released as well (the drain loop's
# next step would have been to release it), and the epoch counter raised past the claim's so
# that a renewal still on its way cannot take the lease again; {0} when the lease was lost.
_DONE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
redis.call('ZREM', KEYS[2], ARGV[2])
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if head then return {1, head} end
redis.call('DEL', KEYS[1])
local epoch = tonumber(ARGV[3])
if (tonumber(redis.call('GET', KEYS[3])) or 0) <= epoch then
  redis.call('SET', KEYS[3], string.format('%d', epoch + 1))
end
return {2}
"""
# KEYS: lease, fence epoch counter, box; ARGV: token, ttl ms.
# Returns {epoch, head or nil} when the lease was free (the head saves the first read), {0}
# when someone holds it. A lease already held by this very token is a claim sent again after
# its answer was lost (a retry on a dropped connection): the same claim, with its epoch.
_CLAIM = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
  return {tonumber(redis.call('GET', KEYS[2])), redis.call('ZRANGE', KEYS[3], 0, 0)[1]}
end
local now = redis.call('TIME')
local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
local epoch = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
if epoch < floor then epoch = floor end
redis.call('SET', KEYS[2], string.format('%d', epoch))
return {epoch, redis.call('ZRANGE', KEYS[3], 0, 0)[1]}
"""
# KEYS: lease, fence epoch counter; ARGV: token, ttl ms, the claim's epoch.
# 1 when renewed, 0 when the lease is someone else's or another claim was granted since.
# A lease that is gone while no newer claim was granted (Redis restarted empty) is taken
# again: the turn carries on under its fencing epoch, and any later claim outgrows it.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if not holder then
  local granted = tonumber(redis.call('GET', KEYS[2]))
  if granted and granted > tonumber(ARGV[3]) then return 0 end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if not granted then redis.call('SET', KEYS[2], ARGV[3]) end
  return 1
end
if holder ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
# The part of a lease a holder does not count on: its checks and sends take this long at most
# after it decided it still holds the lease (an event loop busy, a slow round trip).
_MARGIN = 0.1


# How many wakes the list keeps (the newest): enough for every worker's slots many times over.
_KEPT_WAKES: Final = 10_000
# How long past its own timeout a wait for wakes may take before Redis counts as not answering.
_WAKE_GRACE: Final = 2.0

# No head was read along with the last claim or done: `head()` asks Redis.
_UNREAD: Final = object()


class _RedisClaim(ClaimState):
    def __init__(
        self,
        mailboxes: RedisMailboxes,
        session_key: str,
        token: str,
        epoch: int,
        sent: float,
        head: Any,
    ) -> None:
        """`sent`: the loop time the claim request was sent (the lease runs from then at the
        latest); `head`: the mailbox's oldest entry, read with the claim (None: empty)."""
        super().__init__(session_key, epoch)
        self._boxes = mailboxes
        self._token = token
        self._epoch = epoch
        self._lease = mailboxes.keys.turn_lease(session_key)
        self._heads: dict[str, bytes] = {}
        # The head the claim or the last `done` read in the same script (None: the box was
        # empty then); used once. Work put after that read is not lost: `release` reports it.
        self._next: Any = head
        self._renewer = asyncio.create_task(self._renew_forever(sent))

    async def head(self) -> Inbound | None:
        if self._released:
            return None  # given up with the last `done`: the mailbox is another claim's now
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

    async def behind(
        self, limit: int = BEHIND_LIMIT, *, accept: Callable[[Inbound], bool] = is_plain
    ) -> list[Inbound]:
        if self._released:
            return []
        read = await _call(self._boxes.client.zrange(self._boxes.keys.mailbox(self._key), 1, limit))
        found: list[Inbound] = []
        for raw in read:
            try:
                envelope = decode(raw)
            except BusError as exc:
                log.warning("an unreadable mailbox entry of %s stops a join: %s", self._key, exc)
                break
            if not isinstance(envelope, Inbound) or not accept(envelope):
                break
            # `done` removes the member as it is stored (an encoding made again might differ).
            self._heads[envelope.id] = raw
            found.append(envelope)
        return found

    async def done(self, inbound: Inbound) -> None:
        raw = self._heads.pop(inbound.id, None) or encode(inbound)
        keys = self._boxes.keys
        removed, *head = await _call(
            self._boxes.script_done(
                keys=[self._lease, keys.mailbox(self._key), keys.claim_epoch(self._key)],
                args=[self._token, raw, self._epoch],
            )
        )
        if not removed:
            self._lost.set()
            return
        if int(removed) == 2:
            # Empty, and released in the same script: `release` has nothing left to send.
            self._released = True
            self._renewer.cancel()
            self._next = None
            await self._boxes.forget(self._key)
            return
        self._next = head[0] if head else None

    async def release(self) -> bool:
        await cancel_and_wait(self._renewer)
        if self._released:
            # Work put after `done` emptied the box is drained by whoever puts it: the lease
            # is free for its claim (this process's worker wakes the session again itself).
            return False
        left = await _call(
            self._boxes.script_release(
                keys=[self._lease, self._boxes.keys.mailbox(self._key)], args=[self._token]
            )
        )
        if int(left) == 0:
            left = await self._boxes.forget(self._key)
        return int(left) > 0

    async def _renew_forever(self, sent: float) -> None:
        """Renew every third of the lease; lose the claim when it may have lapsed in Redis.

        The claim is lost at `valid_until` whether or not Redis answers meanwhile: waiting for
        a renewal to fail first (each try takes its own retries) let another worker claim the
        session while this one still ran its turn.
        """
        lease = self._boxes.lease_seconds
        ttl_ms = int(lease * 1000)
        loop = asyncio.get_running_loop()
        valid_until = sent + lease * (1 - _MARGIN)
        next_try = sent + lease / 3
        while True:
            now = loop.time()
            if now >= valid_until:
                log.warning("lost the lease of %s: Redis did not renew it in time", self._key)
                self._lost.set()
                return
            await asyncio.sleep(min(next_try, valid_until) - now)
            if loop.time() >= valid_until:
                continue
            attempt = loop.time()
            try:
                async with asyncio.timeout(valid_until - attempt):
                    renewed = await self._boxes.script_renew(
                        keys=[self._lease, self._boxes.keys.claim_epoch(self._key)],
                        args=[self._token, ttl_ms, self._epoch],
                    )
            except TimeoutError:
                continue
            except RedisError as exc:
                # Logged once for all the claims of the process while Redis is away.
                self._boxes.renewals.failed(exc)
                # Try again soon: the lease may still be saved if Redis answers in time.
                next_try = loop.time() + lease / 10
                continue
            self._boxes.renewals.worked()
            if not renewed:
                log.warning("lost the lease of %s to another worker", self._key)
                self._lost.set()
                return
            valid_until = attempt + lease * (1 - _MARGIN)
            next_try = attempt + lease / 3


class RedisMailboxes:
    """Mailboxes and turn leases in the Redis every worker shares."""

    def __init__(
        self, client: AnyRedis, *, keys: RedisKeys | None = None, lease_seconds: float = 30.0
    ) -> None:
        """Mailboxes in the namespace of `keys` (the default bot's when None)."""
        self.client = client
        self.keys = keys or RedisKeys()
        self.lease_seconds = lease_seconds
        # Says once that renewals fail while Redis is away (and once that they work again).
        self.renewals = Patience("turn lease renewals")
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
            connect_redis(url, retry=_quick_retry()),
            keys=keys,
            lease_seconds=lease_seconds,
        )

    async def put(self, inbound: Inbound) -> None:
        """Add work in the order the gateway received it, and wake a worker for its session."""
        key = inbound.session_key
        # The box first, then the set: a holder emptying the box meanwhile (`forget`) either
        # sees this work or leaves the set's member this adds. The wake last: the worker it
        # wakes finds the work. The list keeps the newest wakes only; a session whose wake
        # was trimmed (no worker popped wakes for long) is found by the sweep.
        await self._in_order(
            ("ZADD", self.keys.mailbox(key), inbound.received_at.timestamp(), encode(inbound)),
            ("SADD", self.keys.mailboxes(), key),
            ("RPUSH", self.keys.wakes(), key),
            ("LTRIM", self.keys.wakes(), -_KEPT_WAKES, -1),
        )

    async def woken(self, within: float) -> str | None:
        """Pop the oldest wake (`BLPOP`), waiting up to `within` seconds for one."""
        # BLPOP waits forever for a timeout of 0: a wait is never shorter than 10 ms.
        wait = max(within, 0.01)
        try:
            # A BLPOP sent while Redis restarts can go unanswered on its new connection: given
            # up after its wait and a grace, so the caller tries again (and says Redis is away).
            async with asyncio.timeout(wait + _WAKE_GRACE):
                popped = await _call(self.client.blpop([self.keys.wakes()], timeout=wait))
        except TimeoutError:
            raise BusUnavailable("redis did not answer a wait for wakes in time") from None
        if not popped:
            return None
        session = popped[1]
        return session.decode() if isinstance(session, bytes) else str(session)

    async def waiting(self) -> int:
        """The items in the mailboxes of the sessions listed with work."""
        listed = await _call(self.client.smembers(self.keys.mailboxes()))
        if not listed:
            return 0
        # One box per session, each in its own slot: a plain pipeline, no transaction.
        async with self.client.pipeline(transaction=False) as pipe:
            for member in listed:
                name = member.decode() if isinstance(member, bytes) else str(member)
                pipe.zcard(self.keys.mailbox(name))
            sizes = await _call(pipe.execute())
        return sum(int(size) for size in sizes)

    async def forget(self, session_key: str) -> int:
        """Take the session out of the set of sessions with work, its box found empty; what
        the box holds after all (work put meanwhile puts the session back).

        On a failure the session is put back in the set if Redis lets it, which is harmless (a
        sweep claims it, finds the box empty and lets go): it is logged, and 0 returned.
        """
        try:
            # A put that added to the box before this look is seen here; one after it added
            # the session to the set after this removal (`put` writes the box first).
            _, left = await self._in_order(
                ("SREM", self.keys.mailboxes(), session_key),
                ("ZCARD", self.keys.mailbox(session_key)),
            )
            if left:
                await _call(self.client.sadd(self.keys.mailboxes(), session_key))
        except BusError as exc:
            log.info("left %s among the sessions with work: %s", session_key, exc)
            with contextlib.suppress(RedisError):
                await self.client.sadd(self.keys.mailboxes(), session_key)
            return 0
        return int(left)

    async def _in_order(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Send `commands` (each a command's arguments) in this order; their replies. On one
        server they go as one pipeline (one connection keeps their order: one round trip); a
        cluster's nodes could reorder them, so there they go one by one."""
        if isinstance(self.client, RedisCluster):
            return [await _call(self.client.execute_command(*command)) for command in commands]
        async with self.client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            return list(await _call(pipe.execute()))

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The session's lease if nobody holds it, with a new fencing epoch (and the head of
        its mailbox, read in the same script)."""
        token = f"{owner}:{secrets.token_hex(8)}"
        sent = asyncio.get_running_loop().time()
        keys = [
            self.keys.turn_lease(session_key),
            self.keys.claim_epoch(session_key),
            self.keys.mailbox(session_key),
        ]
        args = [token, int(self.lease_seconds * 1000)]
        epoch, *head = await _call(self.script_claim(keys=keys, args=args))
        if not epoch:
            return None
        return _RedisClaim(self, session_key, token, int(epoch), sent, head[0] if head else None)

    async def pending(self) -> list[str]:
        """Sessions with waiting work whose turn lease nobody holds: the set's members, then
        whether each lease exists (a hint for a sweep; the claim it leads to is atomic)."""
        listed = self.client.smembers(self.keys.mailboxes())
        members = sorted(
            m.decode() if isinstance(m, bytes) else str(m) for m in await _call(listed)
        )
        if not members:
            return []
        # One lease per session, each in its own slot: a plain pipeline, no transaction.
        async with self.client.pipeline(transaction=False) as pipe:
            for member in members:
                pipe.exists(self.keys.turn_lease(member))
            held = await _call(pipe.execute())
        return [member for member, lease in zip(members, held, strict=True) if not lease]

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
        kind = BusUnavailable if is_outage(exc) else BusError
        raise kind(f"redis mailbox operation failed: {type(exc).__name__}: {exc}") from exc
