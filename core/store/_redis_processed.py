"""The `ProcessedMarks` of `RedisStore`: one expiring key per handled inbound message.

`mark_processed` needs Redis 7 (`SET NX GET`).
"""

from __future__ import annotations

from uuid import uuid4

from core.store._redis_base import RedisBase, text
from core.store._shared import utc_text

__all__ = ["RedisProcessed"]


class RedisProcessed(RedisBase):
    """The `ProcessedMarks` of `RedisStore`; a mark expires after `_processed_ttl_ms`."""

    _processed_ttl_ms: int

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was.

        The marker expires after `processed_ttl`.
        """
        # A unique marker tells a replay of our own SET (it finds the marker it wrote) from a
        # key that someone else marked first.
        marker = f"{utc_text(self._now())} {uuid4().hex}"
        with self._translated(f"mark {key!r} processed"):
            before = await self._client.set(
                self._keys.processed(key), marker, nx=True, px=self._processed_ttl_ms, get=True
            )
        # With GET, SET answers the value it found (it set nothing) or nil (it set ours).
        if before is None:
            return True
        return isinstance(before, bytes | str) and text(before) == marker

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before (within `processed_ttl`)."""
        with self._translated(f"check whether {key!r} was processed"):
            return bool(await self._client.exists(self._keys.processed(key)))
