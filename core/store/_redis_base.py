"""What every concern of `RedisStore` shares: one client, one key namespace, the clock, and the
translation of client failures into `StoreError`s.

Every write is one Lua script (or one command), atomic on the server, and safe to send twice
with the same arguments, which is what the client does when a connection drops: a replayed
script finds the receipt of its first run (`write_receipt`, kept `RECEIPT_SECONDS`) and answers
what that run did instead of applying it again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from core.errors import StoreError, StoreUnavailable
from core.redis_client import is_outage
from core.redis_keys import RedisKeys

__all__ = ["RANKED_MEMBER", "RECEIPT_SECONDS", "RedisBase", "ranked_id", "text"]

# How long a write's receipt outlives it: far longer than the client keeps retrying.
RECEIPT_SECONDS: Final = 600


class RedisBase:
    """The client and the helpers the per-concern classes are built on."""

    def __init__(
        self, client: aioredis.Redis, *, keys: RedisKeys, clock: Callable[[], datetime]
    ) -> None:
        """Wrap a client made with `decode_responses=False`; `close()` closes it."""
        self._client = client
        self._keys = keys
        self._clock = clock
        self._scripts: dict[str, AsyncScript] = {}
        self._closed = False

    async def close(self) -> None:
        """Close the client; later calls raise `StoreError`."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.aclose()
        except RedisError as exc:
            raise StoreError(f"closing the Redis store failed: {exc}") from exc

    def _script(self, source: str) -> AsyncScript:
        """The script of `source`, registered on the client the first time it is asked for."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._client.register_script(source)
        return script

    def _translated(self, action: str) -> _Translated:
        """Turn client failures into `StoreError`s that say what the store was doing (`with`,
        around every store call; refused once the store is closed)."""
        self._ensure_open()
        return _Translated(action)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError("the Redis store is closed")

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)


# Shared by the scripts: a zset member that sorts by an order number among equal scores.
RANKED_MEMBER: Final = "string.format('%020d', {order}) .. ':' .. {session_id}"


def text(value: bytes | str) -> str:
    """A reply of the client (bytes, as made with `decode_responses=False`) as text."""
    return value.decode() if isinstance(value, bytes) else value


def ranked_id(member: bytes) -> str:
    """The session id of a `<order>:<session id>` sorted-set member."""
    return text(member).split(":", 1)[1]


class _Translated:
    """`RedisBase._translated`: a class rather than a generator, as it wraps every store call
    (a generator-based context manager costs several times as much)."""

    __slots__ = ("_action",)

    def __init__(self, action: str) -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if isinstance(exc, RedisError):
            kind = StoreUnavailable if is_outage(exc) else StoreError
            raise kind(f"Redis store could not {self._action}: {exc}") from exc
        if isinstance(exc, ValidationError):
            raise StoreError(
                f"Redis store could not {self._action}: stored data is invalid: {exc}"
            ) from exc
