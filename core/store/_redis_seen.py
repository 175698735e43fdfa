"""The `SeenMarks` of `RedisStore`: one hash per bot and platform, a field per conversation.

A field's value is the message's position (20 digits, so text order is number order: Lua's
numbers are doubles and would round a snowflake), a space, and the mark's JSON.
"""

from __future__ import annotations

from typing import Final

from core.store._redis_base import RedisBase, text
from core.store._shared import check_aware
from core.store.seen import LastSeen

__all__ = ["RedisSeen"]

# KEYS[1] the hash; ARGV[1] the field, ARGV[2] the value. Replaces only an older mark: a replay
# of the same write finds its own mark and answers 0, which says "not newer" truthfully.
_MARK: Final = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and string.sub(old, 1, 20) >= string.sub(ARGV[2], 1, 20) then
    return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class RedisSeen(RedisBase):
    """The `SeenMarks` of `RedisStore`."""

    async def mark_seen(self, mark: LastSeen) -> bool:
        """Keep `mark` unless the conversation's mark is as new or newer; whether it was kept."""
        check_aware(mark, "the seen mark")
        value = f"{mark.position:020d} {mark.model_dump_json()}"
        with self._translated(f"mark {mark.message_id!r} seen in {mark.chat!r}"):
            kept = await self._script(_MARK)(
                keys=[self._keys.seen(mark.platform, mark.bot)], args=[mark.chat, value]
            )
        return bool(kept)

    async def last_seen(self, platform: str, bot: str) -> list[LastSeen]:
        """Every conversation's mark of one bot, newest message first."""
        with self._translated(f"read the seen marks of {platform}:{bot}"):
            values = await self._client.hvals(self._keys.seen(platform, bot))
            marks = [LastSeen.model_validate_json(text(v).partition(" ")[2]) for v in values]
        return sorted(marks, key=lambda mark: (-mark.at.timestamp(), mark.chat))
