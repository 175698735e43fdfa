"""`redis_client`: the redis-py asyncio clients every Redis part of Switchboard is built on.

They are redis-py's own clients, used through its public API. Where one operation needs
several commands in one round trip, the code doing it says so: a `pipeline()` or a Lua script
(docs/decisions/0003-explicit-batching.md says why nothing coalesces unrelated commands).

`connect_redis` reads `REDIS_URL` in any of its forms (`core/backends/redis/urls.py`): one server, a
master found through Sentinel (redis-py's `Sentinel`, the same client classes on its pool), or
a Redis Cluster (redis-py's `RedisCluster`, which routes each command to its slot's node).
When no node of the cluster answers, its client raises what one server's client raises when
the server does not answer (`ConnectionError`), so that every caller's handling of an outage
applies to a cluster restarting too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import traceback
from collections.abc import Iterator
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from core.backends.redis.urls import RedisLocation, parse_redis_url

__all__ = [
    "AnyRedis",
    "connect_redis",
    "describe_redis_error",
    "is_outage",
    "redis_client",
]


def is_outage(exc: RedisError) -> bool:
    """Whether `exc` says Redis is away for now rather than that the command is wrong: the
    connection dropped or timed out, Redis is loading its data after a restart (a
    `ConnectionError` in redis-py), is a replica for now, refuses writes because it cannot
    persist them (`MISCONF`, its disk full), or a cluster is down or moving a slot."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | ReadOnlyError):
        return True
    if isinstance(exc, ClusterDownError | TryAgainError):  # down, or moving a slot
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith("MISCONF")


# A client of one server (or a Sentinel's master), or of a Redis Cluster.
AnyRedis = aioredis.Redis | RedisCluster


_CONNECTION_MODULE = os.path.join(os.path.dirname(redis.__file__), "asyncio", "connection.py")
# Where the innermost frames of a write on a closed stream are: redis-py, asyncio, uvloop.
_BELOW_THE_CONNECTION = (
    os.path.dirname(redis.__file__) + os.sep,
    os.path.dirname(asyncio.__file__) + os.sep,
    "uvloop" + os.sep,
)


def _raised_on_a_closed_stream(exc: BaseException) -> bool:
    """Whether `exc` came out of redis-py's connection code, with nothing but redis-py,
    asyncio and uvloop below it: a stream closed under the command, not a bug of ours."""
    frames = [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]
    if _CONNECTION_MODULE not in frames:
        return False
    last = len(frames) - 1 - frames[::-1].index(_CONNECTION_MODULE)
    return all(name.startswith(_BELOW_THE_CONNECTION) for name in frames[last:])


@contextlib.contextmanager
def _cluster_unreachable_as_connection_error() -> Iterator[None]:
    """redis-py's cluster client says "no node answers" with a `RedisClusterException`, which
    is not a `RedisError`: raise it as the `ConnectionError` a server that does not answer
    gives, as it is one. A slot no node serves yet (the cluster re-forming) is one too.

    When a node answers CLUSTERDOWN (a cluster restarting), redis-py's cluster client closes
    every node's connections, those other commands are using at that moment included; such a
    command then fails inside redis-py on the closed stream (`AttributeError: 'NoneType' object
    has no attribute 'writelines'`, or a `TypeError` from the transport). Its connection was
    dropped under it: that is raised as the `ConnectionError` it is, so the caller's outage
    handling applies rather than the process stopping on an unexpected error. (On uvloop the
    same write raises `RuntimeError: ... the handler is closed`.)"""
    try:
        yield
    except SlotNotCoveredError as exc:
        raise RedisConnectionError(f"the Redis Cluster is re-forming: {exc}") from exc
    except RedisClusterException as exc:
        if isinstance(exc.__cause__, RedisConnectionError | RedisTimeoutError):
            raise RedisConnectionError(str(exc)) from exc
        raise
    except (AttributeError, TypeError, RuntimeError) as exc:
        if not _raised_on_a_closed_stream(exc):
            raise
        raise RedisConnectionError(
            f"the connection to the Redis Cluster was closed under the command ({exc})"
        ) from exc


class _Cluster(RedisCluster):
    """redis-py's cluster client, whose "no node answers" is a `ConnectionError`."""

    async def execute_command(self, *args: EncodableT, **kwargs: Any) -> Any:
        """redis-py's, an unreachable cluster raised as a `ConnectionError`."""
        with _cluster_unreachable_as_connection_error():
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        """redis-py's cluster pipeline, an unreachable cluster raised as a `ConnectionError`."""
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # redis-py's own error
        # redis-py declares `_event_dispatcher` abstract on a base and sets it in `__init__`.
        return _ClusterPipeline(self, transaction)  # type: ignore[abstract]

    async def initialize(
        self,
        additional_startup_nodes_info: list[tuple[str, int]] | None = None,
        last_failed_node_name: str | None = None,
    ) -> _Cluster:
        """redis-py's (asking the nodes for the slots, also before a pipeline), an
        unreachable cluster raised as a `ConnectionError`."""
        with _cluster_unreachable_as_connection_error():
            await super().initialize(additional_startup_nodes_info, last_failed_node_name)
        return self


class _ClusterPipeline(ClusterPipeline):
    """redis-py's cluster pipeline, whose "no node answers" is a `ConnectionError`."""

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        """redis-py's, an unreachable cluster raised as a `ConnectionError`."""
        with _cluster_unreachable_as_connection_error():
            return await super().execute(raise_on_error, allow_redirections)


class _SentinelRedis(aioredis.Redis):
    """A client of the master a `Sentinel` names, which also closes its Sentinel clients."""

    owned_sentinel: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Close the master's pool and the connections to the Sentinels."""
        await super().aclose(close_connection_pool)
        await _close_sentinel(self.owned_sentinel)


async def _close_sentinel(sentinel: Sentinel | None) -> None:
    if sentinel is not None:
        for client in sentinel.sentinels:
            await client.aclose()


def redis_client(url: str, **options: Any) -> aioredis.Redis:
    """`Redis.from_url(url, **options)`, redis-py's client of one server.

    A `redis+sentinel://` URL gives the same kind of client on the master the Sentinels name
    (on redis-py's Sentinel connections). `ValueError` for a cluster URL (`connect_redis`
    takes it) or one that names no Redis.
    """
    location = parse_redis_url(url)
    if location.kind == "cluster":
        raise ValueError("a Redis Cluster URL needs a cluster client (connect_redis)")
    if location.kind == "sentinel":
        return _sentinel_master(location, options)
    return aioredis.Redis.from_url(url, **options)


def connect_redis(url: str, **options: Any) -> AnyRedis:
    """A client for `url` in any of its forms: `redis_client` for one server or a Sentinel's
    master, a `RedisCluster` for `redis+cluster://`."""
    location = parse_redis_url(url)
    if location.kind != "cluster":
        return redis_client(url, **options)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in location.nodes],
        username=location.username,
        password=location.password,
        ssl=location.tls,
        **options,
    )


def _sentinel_master(location: RedisLocation, options: dict[str, Any]) -> aioredis.Redis:
    # The Sentinels are asked with the same timeouts as the master, without its credentials.
    asked = {
        name: options[name]
        for name in ("socket_timeout", "socket_connect_timeout")
        if name in options
    }
    # redis-py leaves `Sentinel.__init__` unannotated.
    sentinel = Sentinel(list(location.nodes), sentinel_kwargs=asked)  # type: ignore[no-untyped-call]
    client: _SentinelRedis = sentinel.master_for(
        location.service,
        redis_class=_SentinelRedis,
        db=location.db,
        username=location.username,
        password=location.password,
        **options,
    )
    client.owned_sentinel = sentinel
    return client


def describe_redis_error(exc: RedisError) -> str:
    """One line saying what a redis-py error means, for an operator.

    redis-py words cluster redirections as the bare reply (`MOVED 9360 host:port` arrives as
    `9360 host:port`): a server in cluster mode reached as one server.
    """
    if isinstance(exc, MovedError | AskError):
        return (
            f"Redis is a cluster node and key slot {exc.slot_id} lives on {exc.host}:{exc.port};"
            " set REDIS_URL to redis+cluster://host:port"
        )
    if isinstance(exc, ClusterDownError):
        return f"the Redis Cluster is down ({exc})"
    if isinstance(exc, ClusterError):
        return f"Redis Cluster error: {exc or type(exc).__name__}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
