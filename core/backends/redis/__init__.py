"""The distributed deployment's backends: SQL records, Redis coordination.

- `bus.py`: `RedisBus`, queues on Redis streams and topics on pub/sub (`_bus_topics.py`).
- `mailboxes.py`: `RedisMailboxes`, the sessions' mailboxes, claims and leases.
- `replies_hold.py`: `RedisReplyHolds`, the holds on the replies the gateways show.
- `client.py` (connecting to one server, a Sentinel's master or a cluster; outages),
  `keys.py` (every key, in one bot's namespace) and `urls.py` (parsing `redis://` URLs).

`open_distributed` opens them together with the SQL store (`core/backends/sql/store/`). Its
modules are imported when it runs: importing this package does not load redis-py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from core.backends import Backends, store_readiness
from core.errors import BusError

if TYPE_CHECKING:
    from core.backends.redis.client import AnyRedis
    from core.backends.redis.keys import RedisKeys

__all__ = ["connect_coordination", "open_distributed"]


@asynccontextmanager
async def open_distributed(
    store_url: str,
    redis_url: str,
    keys: RedisKeys,
    *,
    bus_lease_seconds: float,
    turn_lease_seconds: float,
) -> AsyncIterator[Backends]:
    """The store at `store_url` (schema upgraded) and a bus, mailboxes and reply holds on the
    Redis at `redis_url` under `keys`, closed when the block ends; `BusError` if Redis does
    not answer.

    `bus_lease_seconds`: how long a delivery a gateway took off the bus stays away before it
    comes back. `turn_lease_seconds`: how long a worker that died holds a session at most.
    """
    from core.backends.redis.bus import RedisBus
    from core.backends.redis.mailboxes import RedisMailboxes
    from core.backends.redis.replies_hold import RedisReplyHolds
    from core.backends.sql.store import SqlReplyRecords, SqlStore
    from core.store.replies import HeldReplyRecords

    async with AsyncExitStack() as stack:
        store = await SqlStore.open(store_url)
        stack.push_async_callback(store.close)
        # One client (one connection pool) for the Redis parts of the process but the bus,
        # closed after the parts that use it. The bus keeps a client of its own: its blocking
        # reads and subscriptions hold connections for long, and its few quick retries make a
        # Redis that stays away surface at once (the caller backs off, the subscription says
        # it was interrupted) instead of being retried for seconds inside redis-py.
        client = await connect_coordination(redis_url)
        stack.push_async_callback(client.aclose)
        bus = await RedisBus.connect(redis_url, lease_seconds=bus_lease_seconds, keys=keys)
        stack.push_async_callback(bus.close)
        mailboxes = RedisMailboxes(client, keys=keys, lease_seconds=turn_lease_seconds)
        readiness = store_readiness(store)
        # The record of each reply in the database, the hold on it in Redis.
        records = await SqlReplyRecords.open(store_url)
        stack.push_async_callback(records.close)
        holds = RedisReplyHolds(client, keys=keys, readiness=readiness)
        readiness.add_check("bus", bus.ping)
        yield Backends(
            store,
            bus,
            mailboxes,
            HeldReplyRecords(records, holds),
            distributed=True,
            readiness=readiness,
            redis=client,
        )


async def connect_coordination(url: str) -> AnyRedis:
    """The process's Redis client for coordination (`connect_redis`: one server, a Sentinel's
    master or a cluster), once it answered a PING; `BusError` if it does not."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.exceptions import RedisError

    from core.backends.redis.client import connect_redis, describe_redis_error

    try:
        # A dropped connection is tried again a few times, quickly: every command the shared
        # client carries (lease renewals, holds, counters) may be sent twice.
        client = connect_redis(
            url,
            decode_responses=False,
            retry=Retry(ExponentialWithJitterBackoff(cap=0.5, base=0.05), retries=3),
        )
    except ValueError:
        # The parser's message may quote the URL, and with it a password.
        raise BusError("REDIS_URL is not a valid Redis URL") from None
    try:
        await client.ping()
    except BaseException as exc:
        await client.aclose()
        if isinstance(exc, RedisError):
            raise BusError(f"cannot reach Redis: {describe_redis_error(exc)}") from exc
        raise
    return client
