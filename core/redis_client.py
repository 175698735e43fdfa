"""`redis_client`: the redis-py asyncio client every Redis part of Switchboard is built on.

redis-py 8 gives every connection a 5 s socket timeout and enforces it on each write with
`asyncio.wait_for`, which on Python 3.11 creates a task per command sent and costs the loop an
extra turn. `QuickConnection` bounds the write with `asyncio.timeout` instead (a timer, no
task), so a worker's many small commands cost less CPU; reads keep redis-py's own timeout.
It also writes without the wrapped task that a cancellation could leave waiting (see
docs/performance.md, "Known limits").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["QuickConnection", "redis_client"]


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


def redis_client(url: str, **options: Any) -> aioredis.Redis:
    """`Redis.from_url(url, **options)` on `QuickConnection`s.

    A `rediss://` or `unix://` URL keeps the connection class redis-py picks for it.
    """
    options.setdefault("connection_class", QuickConnection)
    return aioredis.Redis.from_url(url, **options)
