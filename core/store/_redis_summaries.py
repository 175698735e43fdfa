"""The Redis side of `RedisStore`'s compaction summaries.

Per session (keys in `core/redis_keys.py`): a hash of the summaries' JSON by archive marker
(`up_to_seq`), and a sorted set of the markers, so the latest is one lookup. Saving is one
script and safe to replay: it writes the same field and member again.

Methods raise the client's errors as they come; `RedisStore` turns them into `StoreError`s.
"""

from __future__ import annotations

from typing import Final

import redis.asyncio as aioredis

from core import redis_keys
from core.errors import StoreError
from core.store.base import CompactionSummary

__all__ = ["RedisSummaries"]

# KEYS: session, summaries, summary order
# ARGV: up_to_seq, summary (JSON)
# Returns 1, or 0 (nothing written) for an unknown session.
_SAVE: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[1])
return 1
"""

# KEYS: summaries, summary order
# Returns the JSON of the summary with the highest marker, or nil.
_LATEST: Final = """
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0)
if not top[1] then return false end
return redis.call('HGET', KEYS[1], top[1])
"""


class RedisSummaries:
    """Compaction summaries on a Redis client made with `decode_responses=False`."""

    def __init__(self, client: aioredis.Redis) -> None:
        """Register the scripts on `client`."""
        self._save = client.register_script(_SAVE)
        self._latest = client.register_script(_LATEST)

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store the summary, replacing one with the same marker; `StoreError` for no session."""
        saved = await self._save(
            keys=[
                redis_keys.session(session_id),
                redis_keys.summaries(session_id),
                redis_keys.summary_order(session_id),
            ],
            args=[summary.up_to_seq, summary.model_dump_json()],
        )
        if int(saved) != 1:
            raise StoreError(f"cannot save a summary: no session has id {session_id!r}")

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The summary with the highest marker, or None."""
        raw = await self._latest(
            keys=[redis_keys.summaries(session_id), redis_keys.summary_order(session_id)]
        )
        if raw is None:
            return None
        return CompactionSummary.model_validate_json(raw)
