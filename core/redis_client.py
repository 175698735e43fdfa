"""`redis_client`: the redis-py asyncio client every Redis part of Switchboard is built on.

redis-py 8 gives every connection a 5 s socket timeout and enforces it on each write with
`asyncio.wait_for`, which on Python 3.11 creates a task per command sent and costs the loop an
extra turn. `QuickConnection` bounds the write with `asyncio.timeout` instead (a timer, no
task), so a worker's many small commands cost less CPU; reads keep redis-py's own timeout.
It also writes without the wrapped task that a cancellation could leave waiting (see
docs/performance.md, "Known limits"), and packs commands with hiredis, in C.

`BatchingRedis` sends the commands its callers issue in the same turn of the event loop as one
pipeline (one write, one round trip), each caller still awaiting its own reply. A worker
running many turns at once issues many small independent commands; batched, they cost one
round trip instead of one each. It writes a batch and reads the replies itself, under one
timer, rather than through redis-py's pipeline and its timer per reply. Its explicit
pipelines (`pipeline()`) join the batch too, as one unit: their commands stay together and in
order, and a transactional one makes the batch it leaves in a MULTI/EXEC (atomic together
with the rest of the batch, which only makes it stronger). So two parts of a process that
share one `BatchingRedis` (the mailboxes, the reply holds, the bus's non-blocking commands and
the rate limits do, `bots/app.py`) and issue their work at the same time pay one round trip for
all of it. Only commands that never block
may batch (a blocking read would hold up the others in its pipeline): the bus keeps a plain
client for its blocking reads and subscriptions.

`connect_redis` reads `REDIS_URL` in any of its forms (`core/redis_urls.py`): one server, a
master found through Sentinel (redis-py's `Sentinel`, the same client classes on its pool), or
a Redis Cluster (redis-py's `RedisCluster`, which routes each command to its slot's node and
does not batch). When no node of the cluster answers, its client raises what one server's
client raises when the server does not answer (`ConnectionError`), so that every caller's
handling of an outage applies to a cluster restarting too.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

import hiredis
import redis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection
from redis.asyncio.sentinel import Sentinel
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.commands.core import AsyncScript
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    NoScriptError,
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

from core.redis_urls import RedisLocation, parse_redis_url

__all__ = [
    "LATER_SECONDS",
    "AnyRedis",
    "BatchingRedis",
    "QuickConnection",
    "connect_redis",
    "describe_redis_error",
    "is_outage",
    "redis_client",
]

_Command = tuple[tuple[Any, ...], Mapping[str, Any]]

# The longest `BatchingRedis.execute_later` holds a command back, waiting for others to go with.
LATER_SECONDS = 0.02


class _Unit:
    """One caller's work in a batch: a command, or an explicit pipeline's commands."""

    __slots__ = ("commands", "reply", "transaction")

    def __init__(
        self, commands: list[_Command], transaction: bool, reply: asyncio.Future[list[Any]]
    ) -> None:
        self.commands = commands
        self.transaction = transaction
        # The unit's replies in order, errors among them as exceptions.
        self.reply = reply


class QuickConnection(Connection):
    """A TCP connection whose writes are bounded by a timer rather than a task, and whose
    commands are packed by hiredis (in C) rather than argument by argument in Python."""

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        """redis-py's packing, done by `hiredis.pack_command` for what it takes (str as
        UTF-8, bytes, int, float); anything else goes to redis-py's own packer, which also
        raises its errors (None, bool)."""
        if self.encoder.encoding != "utf-8" or self.encoder.encoding_errors != "strict":
            return super().pack_command(*args)
        name = args[0]
        if isinstance(name, str) and " " in name:
            args = (*name.split(), *args[1:])
        elif isinstance(name, bytes) and b" " in name:
            args = (*name.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]  # type: ignore[arg-type]  # checked by hiredis
        except TypeError:
            return super().pack_command(*args)

    async def read_reply(self, disable_decoding: bool = False) -> Any:
        """One reply, read without a timer of its own: the caller bounds a whole batch of
        reads with one (`BatchingRedis`). A read that fails drops the connection and raises
        as redis-py's `read_response` does (`ConnectionError`); a server error is raised
        as its `ResponseError`, the connection kept."""
        try:
            reply = await self._read_response_from_parser(disable_decoding=disable_decoding)
        except OSError as exc:  # ETIMEDOUT included: an error, not a reply
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while reading from the Redis server: {exc}") from exc
        except BaseException:
            # A read cut short (a cancel, the batch's timer) leaves the stream mid-reply.
            await self.disconnect(nowait=True)
            raise
        if self.health_check_interval:
            self.next_health_check = asyncio.get_running_loop().time() + self.health_check_interval
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        """Write one or more packed commands (redis-py's contract, without `wait_for`)."""
        if not self.is_connected:
            await self.connect_check_health(check_health=False)
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]  # redis-py: unannotated
        if isinstance(command, str):
            command = command.encode()
        chunks = [command] if isinstance(command, bytes) else command
        writer = self._writer
        if writer is None:
            raise RedisConnectionError("the connection closed before the write")
        try:
            writer.writelines(chunks)
            # drain() returns at once unless the transport's buffer is full: only then does
            # the timeout matter.
            async with asyncio.timeout(self.socket_timeout):
                await writer.drain()
        except TimeoutError:
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            # A write cut short leaves the protocol stream in an unknown state.
            await self.disconnect(nowait=True)
            raise


class BatchingRedis(aioredis.Redis):
    """A client that pipelines the commands issued in one turn of the event loop.

    Replies and errors reach each caller as if it had sent its command alone; a command whose
    caller was cancelled before the batch left is not sent. Scripts work as on any client (a
    script call is one command of a batch); an explicit pipeline joins the batch as one unit
    (a pipeline that WATCHes keys, or calls scripts through the pipeline, runs on its own).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: list[_Unit] = []
        self._flush_due = False
        # A timer that sends what only `execute_later` queued, when nothing else took it.
        self._later: asyncio.TimerHandle | None = None
        self._batches: set[asyncio.Task[None]] = set()
        # The Sentinel that found this client's master (`redis+sentinel://`), closed with it.
        self.owned_sentinel: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Close the pool (and the connections to the Sentinels, if they found the master)."""
        await super().aclose(close_connection_pool)
        await _close_sentinel(self.owned_sentinel)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Queue the command for this turn of the loop's batch; its reply."""
        (result,) = await self._submit([(args, options)], transaction=False)
        if isinstance(result, Exception):
            raise result
        return result

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        """A pipeline whose `execute()` joins this turn of the loop's batch."""
        return _BatchedPipeline(self, transaction, shard_hint)

    async def execute_later(self, *args: Any, **options: Any) -> Any:
        """`execute_command`, for a command that may wait up to `LATER_SECONDS` for company:
        it leaves with the next batch anything else starts, or alone when that time is up.
        For what a few milliseconds do not change: events fanned out on pub/sub, the pieces
        of a streamed reply (`RedisBus.enqueue(..., later=True)`)."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[list[Any]] = loop.create_future()
        self._waiting.append(_Unit([(args, options)], False, reply))
        if not self._flush_due and self._later is None:
            self._later = loop.call_later(LATER_SECONDS, self._flush)
        (result,) = await reply
        if isinstance(result, Exception):
            raise result
        return result

    async def script_later(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
        """Run a registered script as `execute_later` runs a command (its `EVALSHA` may wait
        for company); a script Redis lost (a restart) is loaded and run at once."""
        try:
            return await self.execute_later("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await script(keys=keys, args=args, client=self)

    async def _submit(self, commands: list[_Command], transaction: bool) -> list[Any]:
        """Queue `commands` as one unit of this turn of the loop's batch; their replies."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[list[Any]] = loop.create_future()
        self._waiting.append(_Unit(commands, transaction, reply))
        if not self._flush_due:
            self._flush_due = True
            # Sent two turns of the loop later, not one: work a caller hands to a task of its
            # own (`asyncio.gather`) starts a turn later and still makes the batch.
            loop.call_soon(loop.call_soon, self._flush)
        return await reply

    def _flush(self) -> None:
        self._flush_due = False
        if self._later is not None:
            self._later.cancel()
            self._later = None
        batch, self._waiting = self._waiting, []
        if not batch:
            return
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _send(self, batch: list[_Unit]) -> None:
        live = [unit for unit in batch if not unit.reply.done()]
        if not live:
            return
        commands = [command for unit in live for command in unit.commands]
        try:
            if any(unit.transaction for unit in live):
                pipe = aioredis.Redis.pipeline(self, transaction=True)
                async with pipe:
                    for args, options in commands:
                        pipe.execute_command(*args, **options)
                    results = await pipe.execute(raise_on_error=False)
            else:
                results = await self._exchange(commands)
        except asyncio.CancelledError:
            for unit in live:
                unit.reply.cancel()
            raise
        except Exception as exc:
            for unit in live:
                if not unit.reply.done():
                    unit.reply.set_exception(exc)
            return
        at = 0
        for unit in live:
            replies = results[at : at + len(unit.commands)]
            at += len(unit.commands)
            if not unit.reply.done():  # else its caller stopped waiting
                unit.reply.set_result(replies)

    async def _exchange(self, commands: list[_Command]) -> list[Any]:
        """Send `commands` in one write on a pooled connection and read their replies, a
        server error among them as the `ResponseError` in its place.

        What redis-py's non-transactional pipeline does, without its observability hooks and
        its per-command dispatch. A dropped connection or a timeout is retried by the
        connection's own `Retry`, as redis-py does: the batch is sent again whole, so its
        commands are applied twice if the first write had reached Redis (the same contract
        as a redis-py pipeline; the callers' writes are idempotent or fenced).
        """
        pool = self.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            return await connection.retry.call_with_retry(  # type: ignore[no-any-return]
                lambda: self._write_and_read(connection, commands),
                lambda _error: connection.disconnect(),
            )
        finally:
            await pool.release(connection)

    async def _write_and_read(
        self, connection: AbstractConnection, commands: list[_Command]
    ) -> list[Any]:
        await connection.send_packed_command(connection.pack_commands(args for args, _ in commands))
        # Our connections read the batch's replies under one timer; another kind (`rediss://`,
        # `unix://`) with redis-py's timer per reply.
        quick = isinstance(connection, QuickConnection)
        results: list[Any] = []
        try:
            async with asyncio.timeout(connection.socket_timeout if quick else None):
                await self._read_replies(connection, commands, quick, results)
        except TimeoutError:
            await connection.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout reading from the Redis server") from None
        except Exception:
            # Replies of the batch may be left unread on the connection: it is not reused.
            await connection.disconnect(nowait=True)
            raise
        return results

    async def _read_replies(
        self,
        connection: AbstractConnection,
        commands: list[_Command],
        quick: bool,
        results: list[Any],
    ) -> None:
        """Read one reply per command into `results`, shaped as redis-py shapes it."""
        callbacks = self.response_callbacks
        for args, options in commands:
            raw = NEVER_DECODE in options
            try:
                if quick:
                    reply = await cast(QuickConnection, connection).read_reply(raw)
                else:
                    reply = await connection.read_response(disable_decoding=raw)
            except ResponseError as error:
                results.append(options.get(EMPTY_RESPONSE, error))
                continue
            callback = callbacks.get(args[0])
            if callback is not None:
                extra = {
                    key: value
                    for key, value in options.items()
                    if key not in (NEVER_DECODE, EMPTY_RESPONSE, "keys")
                }
                reply = callback(reply, **extra)
                if inspect.isawaitable(reply):
                    reply = await reply
            results.append(reply)


class _BatchedPipeline(Pipeline):
    """An explicit pipeline of a `BatchingRedis`: its commands leave with the loop turn's
    batch, together and in order (in a MULTI/EXEC when it is a transaction)."""

    def __init__(self, owner: BatchingRedis, transaction: bool, shard_hint: str | None) -> None:
        super().__init__(owner.connection_pool, owner.response_callbacks, transaction, shard_hint)
        self._owner = owner

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands with the batch; their replies (redis-py's contract)."""
        if self.watching or self.explicit_transaction or self.scripts:
            return await super().execute(raise_on_error)
        stack, self.command_stack = self.command_stack, []
        if not stack:
            return []
        results = await self._owner._submit(stack, self.is_transaction)
        if raise_on_error:
            self.raise_first_error(stack, results)
        return results


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


def redis_client(url: str, *, batching: bool = False, **options: Any) -> aioredis.Redis:
    """`Redis.from_url(url, **options)` on `QuickConnection`s; a `BatchingRedis` with
    `batching` (only for clients that never send a blocking command).

    A `rediss://` or `unix://` URL keeps the connection class redis-py picks for it. A
    `redis+sentinel://` URL gives the same kind of client on the master the Sentinels name
    (on redis-py's Sentinel connections). `ValueError` for a cluster URL (`connect_redis`
    takes it) or one that names no Redis.
    """
    location = parse_redis_url(url)
    if location.kind == "cluster":
        raise ValueError("a Redis Cluster URL needs a cluster client (connect_redis)")
    if location.kind == "sentinel":
        return _sentinel_master(location, batching, options)
    options.setdefault("connection_class", QuickConnection)
    kind = BatchingRedis if batching else aioredis.Redis
    return kind.from_url(url, **options)


def connect_redis(url: str, *, batching: bool = False, **options: Any) -> AnyRedis:
    """A client for `url` in any of its forms: `redis_client` for one server or a Sentinel's
    master, a `RedisCluster` for `redis+cluster://` (`batching` does not apply to it)."""
    location = parse_redis_url(url)
    if location.kind != "cluster":
        return redis_client(url, batching=batching, **options)
    options.pop("connection_class", None)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in location.nodes],
        username=location.username,
        password=location.password,
        ssl=location.tls,
        **options,
    )


def _sentinel_master(
    location: RedisLocation, batching: bool, options: dict[str, Any]
) -> aioredis.Redis:
    options.pop("connection_class", None)  # Sentinel's own: it asks where the master is
    # The Sentinels are asked with the same timeouts as the master, without its credentials.
    asked = {
        name: options[name]
        for name in ("socket_timeout", "socket_connect_timeout")
        if name in options
    }
    # redis-py leaves `Sentinel.__init__` unannotated.
    sentinel = Sentinel(list(location.nodes), sentinel_kwargs=asked)  # type: ignore[no-untyped-call]
    kind: type[BatchingRedis | _SentinelRedis] = BatchingRedis if batching else _SentinelRedis
    client: BatchingRedis | _SentinelRedis = sentinel.master_for(
        location.service,
        redis_class=kind,
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
