"""`RedisReplyRecords`: reply records in Redis, shared by every gateway of a deployment.

A record is msgpack of `{v, body}` under `RedisKeys.reply_record`, kept for a day. The hold on
a reply is a short lease, `SET NX PX` of a random token under `RedisKeys.reply_hold`, renewed
while held (a platform call may wait out a rate limit) and removed by its holder only (Lua
compare-and-delete); a gateway that dies while holding a reply blocks it for at most
`lease_seconds`.

A record saved after the platform showed a message, and the release of a hold, are tried
again while Redis is unreachable (a restart), for up to `patience`: a record lost there would
have the message sent again by the next delivery of its entry, and a hold left behind would
stop every delivery of its reply (and, one gateway delivering in order, the queue behind it)
until its lease ran out.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import msgpack
import redis.asyncio as aioredis
from pydantic import ValidationError
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

from core.errors import ChannelError
from core.readiness import Readiness
from core.redis_client import redis_client
from core.redis_keys import RedisKeys
from core.store.replies import RECORD_TTL_SECONDS, REPLY_RECORD_VERSION, LocalHolds, ReplyRecord
from core.tasks import cancel_and_wait

__all__ = ["RedisReplyRecords"]

log = logging.getLogger(__name__)

# The name under which a write waiting for Redis marks the process's readiness down.
_LOOP = "reply records"

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


class RedisReplyRecords:
    """Reply records and holds in Redis (`from_url`, then `aclose`)."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        keys: RedisKeys | None = None,
        lease_seconds: float = 30.0,
        patience: float = 30.0,
        poll: float = 0.02,
        readiness: Readiness | None = None,
    ) -> None:
        """`readiness` (the process's) is told while a write waits for Redis to come back:
        `reply records` is down meanwhile."""
        self._redis = client
        self._readiness = readiness
        self._keys = keys or RedisKeys()
        self._lease_ms = int(lease_seconds * 1000)
        self._patience = patience
        self._poll = poll
        # Holders in this process queue locally first, so only one of them polls Redis.
        self._local = LocalHolds()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisReplyRecords:
        """Records in the Redis at `url` (binary replies: payloads are msgpack)."""
        return cls(redis_client(url, decode_responses=False), **options)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, if any; `ChannelError` if Redis cannot be read."""
        try:
            raw = await self._redis.get(self._keys.reply_record(key))
        except RedisError as exc:
            raise ChannelError(f"cannot read the record of reply {key}: {exc}") from exc
        if raw is None:
            return None
        try:
            data = msgpack.unpackb(raw, raw=False)
            if data.get("v") != REPLY_RECORD_VERSION:
                return None  # a format this version does not know: start afresh
            return ReplyRecord.model_validate(data["body"])
        except (ValueError, KeyError, AttributeError, ValidationError, msgpack.UnpackException):
            return None

    async def save(self, record: ReplyRecord) -> None:
        """Store `record` for a day."""
        packed = msgpack.packb({"v": REPLY_RECORD_VERSION, "body": record.model_dump()})
        try:
            await self._while_away(
                lambda: self._redis.set(
                    self._keys.reply_record(record.key), packed, ex=RECORD_TTL_SECONDS
                )
            )
        except RedisError as exc:
            raise ChannelError(f"cannot save the record of reply {record.key}: {exc}") from exc

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` across processes until the block ends."""
        return self._hold(key)

    @asynccontextmanager
    async def _hold(self, key: str) -> AsyncIterator[None]:
        async with self._local.hold(key):
            token = secrets.token_hex(8)
            await self._acquire(key, token)
            renewing = asyncio.create_task(self._renew(key, token))
            try:
                yield
            finally:
                await cancel_and_wait(renewing)
                try:
                    await self._while_away(
                        lambda: self._redis.eval(_RELEASE, 1, self._keys.reply_hold(key), token)
                    )
                except RedisError as exc:
                    log.warning("could not release the hold of reply %s: %s", key, exc)

    async def _renew(self, key: str, token: str) -> None:
        """Keep the hold while its holder works (a third of the lease at a time)."""
        while True:
            await asyncio.sleep(self._lease_ms / 3000)
            try:
                if not await self._redis.eval(
                    _RENEW, 1, self._keys.reply_hold(key), token, self._lease_ms
                ):
                    return  # lapsed (Redis was away); the holder finishes regardless
            except RedisError:
                continue  # a later renewal may still make it

    async def _acquire(self, key: str, token: str) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self._patience
        while True:
            try:
                if await self._while_away(lambda: self._take(key, token)):
                    return
            except RedisError as exc:
                raise ChannelError(f"cannot hold reply {key}: {exc}") from exc
            if loop.time() >= give_up_at:
                raise ChannelError(f"reply {key} stayed held by another gateway")
            # Another gateway shows a piece of this reply: a platform call or two.
            await asyncio.sleep(self._poll)

    async def _take(self, key: str, token: str) -> bool:
        """Whether the hold of `key` is `token`'s now (taken, or taken by a try whose answer
        a dropped connection lost before this one was sent)."""
        hold = self._keys.reply_hold(key)
        if await self._redis.set(hold, token, nx=True, px=self._lease_ms):
            return True
        return bool(await self._redis.get(hold) == token.encode())

    async def _while_away(self, operation: Callable[[], Awaitable[_T]]) -> _T:
        """`operation()`, tried again while Redis is unreachable, for up to `patience`
        (`reply records` marked down in the process's readiness meanwhile)."""
        # The first attempt is made directly: almost every one succeeds, and building the
        # retry loop for it would cost every delivery (as in `core.readiness.keep_trying`).
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
