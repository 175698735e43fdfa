"""`RedisReplyHolds`: the cross-process hold on a reply, a short lease in Redis.

Gateways of one platform may each take a piece of the same reply; before one shows a piece it
holds the reply (`core/store/replies.py`), so two gateways never both send its first message.
The record of what a reply shows is a record, kept in the SQL database (`SqlReplyRecords`); the
hold is coordination and lives here. `HeldReplyRecords` puts the two together.

A hold is `SET NX PX` of a random token under `RedisKeys.reply_hold` (hash tag `{r:<reply
key>}`), renewed while held (a platform call may wait out a rate limit) and removed by its
holder only (compare-and-delete); a gateway that dies while holding a reply blocks it for at
most `lease_seconds`. Holders in one process queue on a local lock first, so only one of them
polls Redis.

The release of a hold is tried again while Redis is unreachable (a restart), for up to
`patience`: a hold left behind would stop every delivery of its reply (and, one gateway
delivering in order, the queue behind it) until its lease ran out. Taking a hold waits out an
outage the same way.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from core.backends.redis.client import AnyRedis
from core.backends.redis.keys import RedisKeys
from core.errors import ChannelError
from core.readiness import Readiness
from core.store.replies import LocalHolds
from core.tasks import cancel_and_wait

__all__ = ["RedisReplyHolds"]

log = logging.getLogger(__name__)

# The name under which a hold waiting for Redis marks the process's readiness down.
_LOOP = "reply holds"

_T = TypeVar("_T")

# KEYS: hold; ARGV: token. Deletes the hold only if it is still ours.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: hold; ARGV: token, ttl ms. Extends the hold only if it is still ours.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


class RedisReplyHolds:
    """Holds on replies, one holder at a time across every process on one Redis."""

    def __init__(
        self,
        client: AnyRedis,
        *,
        keys: RedisKeys | None = None,
        lease_seconds: float = 30.0,
        patience: float = 30.0,
        poll: float = 0.02,
        readiness: Readiness | None = None,
    ) -> None:
        """Holds through `client` (the process's, which closes it), in the namespace of
        `keys`. `readiness` (the process's) is told while a hold waits for Redis to come
        back: `reply holds` is down meanwhile."""
        self._redis = client
        self._keys = keys or RedisKeys()
        self._lease_ms = int(lease_seconds * 1000)
        self._patience = patience
        self._poll = poll
        self._readiness = readiness
        self._local = LocalHolds()
        self._release = client.register_script(_RELEASE)
        self._renew_script = client.register_script(_RENEW)

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` across processes until the block ends; `ChannelError` if another
        holds it longer than `patience` or Redis stays away as long."""
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: str) -> AsyncIterator[None]:
        async with self._local.hold(key):
            token = secrets.token_hex(8)
            where = self._keys.reply_hold(key)
            await self._acquire(key, where, token)
            renewing = asyncio.create_task(self._renew(where, token))
            try:
                yield
            finally:
                await cancel_and_wait(renewing)
                try:
                    await self._while_away(lambda: self._release(keys=[where], args=[token]))
                except RedisError as exc:
                    log.warning("could not release the hold of reply %s: %s", key, exc)

    async def _renew(self, where: str, token: str) -> None:
        """Keep the hold while its holder works (a third of the lease at a time)."""
        while True:
            await asyncio.sleep(self._lease_ms / 3000)
            try:
                if not await self._renew_script(keys=[where], args=[token, self._lease_ms]):
                    return  # lapsed (Redis was away); the holder finishes regardless
            except RedisError:
                continue  # a later renewal may still make it

    async def _acquire(self, key: str, where: str, token: str) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self._patience
        while True:
            try:
                if await self._while_away(lambda: self._take(where, token)):
                    return
            except RedisError as exc:
                raise ChannelError(f"cannot hold reply {key}: {exc}") from exc
            if loop.time() >= give_up_at:
                raise ChannelError(f"reply {key} stayed held by another gateway")
            # Another gateway shows a piece of this reply: a platform call or two.
            await asyncio.sleep(self._poll)

    async def _take(self, where: str, token: str) -> bool:
        """Whether the hold is `token`'s now (taken, or taken by a try whose answer a dropped
        connection lost before this one was sent)."""
        if await self._redis.set(where, token, nx=True, px=self._lease_ms):
            return True
        held = await self._redis.get(where)
        return held in (token, token.encode())

    async def _while_away(self, operation: Callable[[], Awaitable[_T]]) -> _T:
        """`operation()`, tried again while Redis is unreachable, for up to `patience`
        (`reply holds` marked down in the process's readiness meanwhile)."""
        # The first attempt is made directly: almost every one succeeds.
        try:
            return await operation()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            first = exc
        readiness = self._readiness
        if readiness is not None:
            readiness.down(_LOOP, f"{first} (trying again)")

        def waiting(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            if readiness is not None:
                readiness.down(_LOOP, f"{error} (trying again)")

        retrying = AsyncRetrying(
            retry=retry_if_exception_type((RedisConnectionError, RedisTimeoutError)),
            wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
            stop=stop_after_delay(self._patience),
            before_sleep=waiting,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                result = await operation()
            outcome = attempt.retry_state.outcome
            if outcome is not None and outcome.failed:
                continue  # tenacity waits, then tries again (or raises when it gives up)
            if readiness is not None:
                readiness.up(_LOOP)
            return result
        raise AssertionError("unreachable: tenacity returns or raises")
