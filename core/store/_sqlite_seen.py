"""The `SeenMarks` of `SqliteStore`: one row per conversation."""

from __future__ import annotations

from typing import Final

from core.store._shared import check_aware, from_utc_text, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.seen import LastSeen

__all__ = ["MIGRATION", "SqliteSeen"]

MIGRATION: Final = (
    """
    CREATE TABLE seen (
        platform TEXT NOT NULL,
        bot TEXT NOT NULL,
        chat TEXT NOT NULL,
        message_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (platform, bot, chat)
    )
    """,
)


class SqliteSeen(SqliteBase):
    """The `SeenMarks` of `SqliteStore`."""

    async def mark_seen(self, mark: LastSeen) -> bool:
        """Keep `mark` unless the conversation's mark is as new or newer; whether it was kept."""
        check_aware(mark, "the seen mark")
        async with self._write(f"mark {mark.message_id!r} seen in {mark.chat!r}"):
            cursor = await self._db.execute(
                """
                INSERT INTO seen (platform, bot, chat, message_id, position, at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (platform, bot, chat) DO UPDATE SET
                    message_id = excluded.message_id,
                    position = excluded.position,
                    at = excluded.at
                WHERE excluded.position > seen.position
                """,
                (
                    mark.platform,
                    mark.bot,
                    mark.chat,
                    mark.message_id,
                    mark.position,
                    utc_text(mark.at),
                ),
            )
            return cursor.rowcount == 1

    async def last_seen(self, platform: str, bot: str) -> list[LastSeen]:
        """Every conversation's mark of one bot, newest message first."""
        async with self._read(f"read the seen marks of {platform}:{bot}"):
            rows = await self._db.execute_fetchall(
                "SELECT chat, message_id, position, at FROM seen"
                " WHERE platform = ? AND bot = ? ORDER BY at DESC, chat",
                (platform, bot),
            )
            return [
                LastSeen(
                    platform=platform,
                    bot=bot,
                    chat=str(chat),
                    message_id=str(message_id),
                    position=int(position),
                    at=from_utc_text(str(at)),
                )
                for chat, message_id, position, at in rows
            ]
