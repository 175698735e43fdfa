"""`RedisStore`: the `Store` on Redis, shared by every process of a distributed deployment.

One class per concern, each in its own module and all on one client and one key namespace
(`_redis_base.py`, keys in `core/redis_keys.py`): the conversation log (`_redis_log.py`), the
cost ledger (`_redis_ledger.py`), schedules (`_redis_schedules.py`), remembered facts
(`_redis_facts.py`), checkpoints (`_redis_checkpoints.py`), processed marks
(`_redis_processed.py`), seen marks (`_redis_seen.py`) and access records
(`_redis_access.py`). Values are JSON of pydantic models.

Every write is one script or command, atomic on the server, and safe to send twice (a stale
pooled connection after a Redis restart, a lost reply): a replayed script finds the receipt of
its first run and returns that run's reply instead of storing a message or a charge twice.

Durability: a write is done when the server has run it. Whether it survives a crash of the
server is a deployment setting: run Redis with `appendonly yes` (`appendfsync always` to lose
nothing, `everysec` to risk up to a second). Every key a script touches is passed in `KEYS`,
but the keys of one operation do not share a hash slot: this store wants one Redis server (or
a replicated primary), not a Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from core.clock import utc_now
from core.errors import StoreError
from core.redis_client import redis_client
from core.redis_keys import RedisKeys
from core.store._redis_access import RedisAccess
from core.store._redis_checkpoints import RedisCheckpoints
from core.store._redis_facts import RedisFacts
from core.store._redis_ledger import RedisLedger
from core.store._redis_log import RedisLog
from core.store._redis_processed import RedisProcessed
from core.store._redis_schedules import RedisSchedules
from core.store._redis_seen import RedisSeen

__all__ = ["DEFAULT_PROCESSED_TTL", "RedisStore"]

# How long "this inbound message was answered" is remembered: far longer than any platform
# redelivers an update, short enough that the markers do not pile up forever.
DEFAULT_PROCESSED_TTL: Final = timedelta(days=30)


class RedisStore(
    RedisLog,
    RedisLedger,
    RedisSchedules,
    RedisFacts,
    RedisCheckpoints,
    RedisProcessed,
    RedisSeen,
    RedisAccess,
):
    """The `Store` on Redis, opened with `await RedisStore.open(url)`.

    Every write is a single atomic command or script, complete when the awaited call returns.
    All keys are in the namespace of `keys` (one bot's, see `core/redis_keys.py`).
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        keys: RedisKeys | None = None,
        clock: Callable[[], datetime] = utc_now,
        processed_ttl: timedelta = DEFAULT_PROCESSED_TTL,
    ) -> None:
        """Wrap a client made with `decode_responses=False`; `close()` closes it. Without
        `keys`, the default bot's namespace."""
        if processed_ttl <= timedelta(0):
            raise ValueError(f"processed_ttl must be positive, got {processed_ttl}")
        super().__init__(client, keys=keys or RedisKeys(), clock=clock)
        self._processed_ttl_ms = max(1, processed_ttl // timedelta(milliseconds=1))

    @property
    def client(self) -> aioredis.Redis:
        """The store's client. A process shares it (a `BatchingRedis` when `open` made it) with
        its mailboxes, its bus's non-blocking commands and its rate limits, so that what they
        issue at the same time leaves in one round trip (`bots/app.py`)."""
        return self._client

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        keys: RedisKeys | None = None,
        clock: Callable[[], datetime] = utc_now,
        processed_ttl: timedelta = DEFAULT_PROCESSED_TTL,
    ) -> RedisStore:
        """Connect to the Redis at `url` and check that it answers.

        The client retries a dropped connection briefly (every write is idempotent); a server
        that stays unreachable is a `StoreError`.
        """
        where = _describe(url)
        try:
            client = redis_client(url, batching=True, decode_responses=False, retry=_retry())
        except ValueError:
            # The parser's message may quote the URL, and with it a password.
            raise StoreError(f"the Redis store URL {where} is not valid") from None
        try:
            await client.ping()
        except BaseException as exc:
            await client.aclose()
            if isinstance(exc, RedisError):
                raise StoreError(f"cannot reach the Redis store at {where}: {exc}") from exc
            raise
        return cls(client, keys=keys, clock=clock, processed_ttl=processed_ttl)


def _retry() -> Retry:
    """Retry a dropped connection a few times, quickly.

    Safe because every write is idempotent (see the module docstring); a server that stays away
    surfaces as a `StoreError` within a second instead of holding up a turn.
    """
    return Retry(ExponentialWithJitterBackoff(cap=0.5, base=0.05), retries=3)


def _describe(url: str) -> str:
    """The URL without its credentials, fit for an error message."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(unparsable URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"
