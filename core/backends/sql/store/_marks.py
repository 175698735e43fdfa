"""The `ProcessedMarks` and `SeenMarks` of `SqlStore`: a row per handled inbound message, and
a row per conversation for the newest message seen in it."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import insert_ignoring, upsert
from core.backends.sql.store._tables import processed, seen
from core.store._shared import check_aware, from_utc_text, utc_text
from core.store.seen import LastSeen

__all__ = ["SqlProcessed", "SqlSeen", "mark", "marked"]


class SqlProcessed(SqlBase):
    """The `ProcessedMarks` of `SqlStore`."""

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was."""
        now = self._now()
        async with self._begin(f"mark {key!r} processed") as db:
            return await mark(db, self._dialect, key, now)

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before."""
        async with self._read(f"check whether {key!r} was processed") as db:
            return await marked(db, key)


async def mark(db: AsyncConnection, dialect: str, key: str, now: datetime) -> bool:
    """Mark `key` processed (`ProcessedMarks.mark_processed`) in the transaction of `db`."""
    values = {"key": key, "at": utc_text(now)}
    inserted = await db.execute(insert_ignoring(dialect, processed), values)
    return bool(inserted.rowcount == 1)


_MARKED: Final = select(processed.c.key).where(processed.c.key == bindparam("key"))


async def marked(db: AsyncConnection, key: str) -> bool:
    """Whether `key` is marked processed."""
    found = await db.execute(_MARKED, {"key": key})
    return found.first() is not None


class SqlSeen(SqlBase):
    """The `SeenMarks` of `SqlStore`."""

    async def mark_seen(self, mark: LastSeen) -> bool:
        """Keep `mark` unless the conversation's mark is as new or newer; whether it was kept."""
        check_aware(mark, "the seen mark")
        values = {
            "platform": mark.platform,
            "bot": mark.bot,
            "chat": mark.chat,
            "message_id": mark.message_id,
            "position": mark.position,
            "at": utc_text(mark.at),
        }
        statement = upsert(
            self._dialect,
            seen,
            tuple(values),
            keys=("platform", "bot", "chat"),
            newer="position",
        )
        async with self._begin(f"mark {mark.message_id!r} seen in {mark.chat!r}") as db:
            return (await db.execute(statement, values)).rowcount == 1

    async def last_seen(self, platform: str, bot: str) -> list[LastSeen]:
        """Every conversation's mark of one bot, newest message first."""
        s = seen.c
        query = (
            select(s.chat, s.message_id, s.position, s.at)
            .where(s.platform == platform, s.bot == bot)
            .order_by(s.at.desc(), s.chat)
        )
        async with self._read(f"read the seen marks of {platform}:{bot}") as db:
            return [
                LastSeen(
                    platform=platform,
                    bot=bot,
                    chat=str(chat),
                    message_id=str(message_id),
                    position=int(position),
                    at=from_utc_text(str(at)),
                )
                for chat, message_id, position, at in await db.execute(query)
            ]
