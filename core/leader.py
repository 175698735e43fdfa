"""`Leadership`: one holder at a time of a named role, across processes, on a Redis lease.

Some platforms allow one reader per bot (long polling, a gateway websocket); with several
gateway replicas, the one holding the `<role>:<bot>` lease its channel names reads, and the
others wait to take over.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from redis.exceptions import RedisError

from core.backends.redis.client import AnyRedis
from core.backends.redis.keys import RedisKeys
from core.tasks import cancel_and_wait

__all__ = ["Leadership"]

log = logging.getLogger(__name__)

# KEYS: lease; ARGV: token, ttl ms. 1 when renewed, 0 when another process holds it.
# A lease that is gone (Redis restarted empty) is taken again: nobody else holds it.
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
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Leadership:
    """Wait for a role, hold it while renewing, and notice when it is lost."""

    def __init__(
        self,
        client: AnyRedis,
        role: str,
        *,
        owner: str,
        keys: RedisKeys | None = None,
        ttl: float = 15.0,
        retry_every: float = 2.0,
    ) -> None:
        self._client = client
        # The lease lives in the bot's namespace: two bots may each have a poller of their own.
        self._key = (keys or RedisKeys()).lease(role)
        self._token = f"{owner}:{secrets.token_hex(8)}"
        self._ttl = ttl
        self._retry_every = retry_every
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._renewer: asyncio.Task[None] | None = None
        self.lost = asyncio.Event()
        self.role = role

    async def acquire(self) -> None:
        """Wait until this process holds the role, then keep renewing it."""
        waited = False
        while True:
            try:
                if await self._client.set(
                    self._key, self._token, nx=True, px=int(self._ttl * 1000)
                ):
                    break
            except RedisError as exc:
                log.warning("cannot reach Redis to take %s: %s", self.role, exc)
            if not waited:
                log.info("another process holds %s; standing by", self.role)
                waited = True
            await asyncio.sleep(self._retry_every)
        log.info("took %s", self.role)
        self._renewer = asyncio.create_task(self._renew_forever())

    async def release(self) -> None:
        """Give the role up (if still held) so a standby takes over at once."""
        if self._renewer is not None:
            await cancel_and_wait(self._renewer)
        try:
            await self._release(keys=[self._key], args=[self._token])
        except RedisError as exc:
            log.warning("could not release %s (it will lapse): %s", self.role, exc)

    async def _renew_forever(self) -> None:
        loop = asyncio.get_running_loop()
        valid_until = loop.time() + self._ttl
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                held = await self._renew(
                    keys=[self._key], args=[self._token, int(self._ttl * 1000)]
                )
            except RedisError as exc:
                log.warning("could not renew %s: %s", self.role, exc)
                if loop.time() >= valid_until:
                    break
                continue
            if not held:
                break
            valid_until = loop.time() + self._ttl
        log.error("lost %s", self.role)
        self.lost.set()
