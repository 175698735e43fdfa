"""`redis_client`: the redis-py asyncio client every Redis part of Switchboard is built on.

redis-py 8 gives every connection a 5 s socket timeout and enforces it on each write with
`asyncio.wait_for`, which on Python 3.11 creates a task per command sent and costs the loop an
extra turn. `QuickConnection` bounds the write with `asyncio.timeout` instead (a timer, no
task), so a worker's many small commands cost less CPU; reads keep redis-py's own timeout.
It also writes without the wrapped task that a cancellation could leave waiting (see
docs/performance.md, "Known limits").

`BatchingRedis` sends the commands its callers issue in the same turn of the event loop as one
pipeline (one write, one round trip), each caller still awaiting its own reply. A worker
running many turns at once issues many small independent commands; batched, they cost one
round trip instead of one each. Only clients whose commands never block may batch (a blocking
read would hold up the others in its pipeline): the store's and the mailboxes', not the bus's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["BatchingRedis", "QuickConnection", "redis_client"]

_Waiting = tuple[tuple[Any, ...], dict[str, Any], "asyncio.Future[Any]"]


class QuickConnection(Connection):
    """A TCP connection whose writes are bounded by a timer rather than a task."""

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
    caller was cancelled before the batch left is not sent. Explicit pipelines and scripts
    work as on any client (a script call is one command of a batch).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: list[_Waiting] = []
        self._flush_due = False
        self._batches: set[asyncio.Task[None]] = set()

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Queue the command for this turn of the loop's batch; its reply."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._waiting.append((args, options, reply))
        if not self._flush_due:
            self._flush_due = True
            loop.call_soon(self._flush)
        return await reply

    def _flush(self) -> None:
        self._flush_due = False
        batch, self._waiting = self._waiting, []
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _send(self, batch: list[_Waiting]) -> None:
        live = [waiting for waiting in batch if not waiting[2].done()]
        if not live:
            return
        try:
            if len(live) == 1:
                args, options, _ = live[0]
                sent = aioredis.Redis.execute_command(self, *args, **options)  # type: ignore[no-untyped-call]
                results = [await sent]
            else:
                async with self.pipeline(transaction=False) as pipe:
                    for args, options, _ in live:
                        pipe.execute_command(*args, **options)
                    results = await pipe.execute(raise_on_error=False)
        except asyncio.CancelledError:
            for _, _, reply in live:
                reply.cancel()
            raise
        except Exception as exc:
            for _, _, reply in live:
                if not reply.done():
                    reply.set_exception(exc)
            return
        for (_, _, reply), result in zip(live, results, strict=True):
            if reply.done():
                continue  # its caller stopped waiting
            if isinstance(result, Exception):
                reply.set_exception(result)
            else:
                reply.set_result(result)


def redis_client(url: str, *, batching: bool = False, **options: Any) -> aioredis.Redis:
    """`Redis.from_url(url, **options)` on `QuickConnection`s; a `BatchingRedis` with
    `batching` (only for clients that never send a blocking command).

    A `rediss://` or `unix://` URL keeps the connection class redis-py picks for it.
    """
    options.setdefault("connection_class", QuickConnection)
    kind = BatchingRedis if batching else aioredis.Redis
    return kind.from_url(url, **options)
