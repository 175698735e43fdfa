"""The `PlaybookRecords` of `SqlStore`: a row per bot, tool sequence and keyword digest."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import upsert_counting
from core.backends.sql.store._tables import playbook
from core.store._shared import utc_text
from core.store.playbook import PlaybookEntry

__all__ = ["SqlPlaybook"]

_p = playbook.c


class SqlPlaybook(SqlBase):
    """The `PlaybookRecords` of `SqlStore`."""

    async def record_sequence(
        self, bot: str, tools: Sequence[str], keywords: Sequence[str]
    ) -> None:
        """Count one more successful turn of `tools` for each of `keywords`."""
        if not tools or not keywords:
            return
        joined, now = " ".join(tools), utc_text(self._now())
        async with self._begin(f"record a tool sequence of {bot!r}") as db:
            # Sorted: two turns recording the same rows lock them in the same order.
            for keyword in sorted(set(keywords)):
                values = {
                    "bot": bot,
                    "tools": joined,
                    "keyword": keyword,
                    "successes": 1,
                    "updated_at": now,
                }
                await db.execute(
                    upsert_counting(
                        self._dialect,
                        playbook,
                        values,
                        keys=["bot", "tools", "keyword"],
                        count="successes",
                    )
                )

    async def find_sequences(
        self, bot: str, keywords: Sequence[str], *, limit: int
    ) -> list[PlaybookEntry]:
        """The bot's sequences recorded with any of `keywords`, best first."""
        if not keywords or limit < 1:
            return []
        matched = func.count().label("matched")
        successes = func.max(_p.successes).label("successes")
        query = (
            select(_p.tools, matched, successes)
            .where(_p.bot == bot, _p.keyword.in_(sorted(set(keywords))))
            .group_by(_p.tools)
            .order_by(matched.desc(), successes.desc(), func.max(_p.updated_at).desc(), _p.tools)
            .limit(limit)
        )
        async with self._read(f"find tool sequences of {bot!r}") as db:
            rows = (await db.execute(query)).all()
        return [
            PlaybookEntry(
                tools=tuple(row.tools.split()), matched=row.matched, successes=row.successes
            )
            for row in rows
        ]
