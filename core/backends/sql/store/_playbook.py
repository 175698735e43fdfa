"""The `PlaybookRecords` of `SqlStore`: a row per bot, tool sequence and keyword digest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import Integer, and_, bindparam, case, delete, func, not_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import upsert_counting
from core.backends.sql.store._tables import playbook
from core.store._shared import check_limit, from_utc_text, utc_text
from core.store.playbook import PlaybookEntry, PlaybookSequence

__all__ = ["SqlPlaybook"]

_p = playbook.c
_MATCHED: Final = func.count().label("matched")
_SUCCESSES: Final = func.max(_p.successes).label("successes")
_FOUND: Final = (
    select(_p.tools, _MATCHED, _SUCCESSES)
    .where(_p.bot == bindparam("bot"), _p.keyword.in_(bindparam("keywords", expanding=True)))
    .group_by(_p.tools)
    .limit(bindparam("limit", type_=Integer))
)
_BEST: Final = (_MATCHED.desc(), _SUCCESSES.desc(), func.max(_p.updated_at).desc(), _p.tools)
# The proven first (`proven`: the successes that make a sequence proven), then the best.
_FIND: Final = _FOUND.order_by(*_BEST)
_FIND_PROVEN: Final = _FOUND.order_by(
    case((func.max(_p.successes) >= bindparam("proven", type_=Integer), 0), else_=1), *_BEST
)
_ROWS_OF: Final = select(func.count()).select_from(playbook).where(_p.bot == bindparam("bot"))


class SqlPlaybook(SqlBase):
    """The `PlaybookRecords` of `SqlStore`."""

    async def record_sequence(
        self, bot: str, tools: Sequence[str], keywords: Sequence[str], *, keep: int | None = None
    ) -> None:
        """Count one more successful turn of `tools` for each of `keywords`; with `keep`, the
        bot's rows beyond it pruned in the same transaction."""
        if not tools or not keywords:
            return
        joined, now = " ".join(tools), utc_text(self._now())
        # Sorted: two turns recording the same rows lock them in the same order.
        written = sorted(set(keywords))
        async with self._begin(f"record a tool sequence of {bot!r}") as db:
            for keyword in written:
                values = {
                    "bot": bot,
                    "tools": joined,
                    "keyword": keyword,
                    "successes": 1,
                    "updated_at": now,
                }
                statement = upsert_counting(
                    self._dialect,
                    playbook,
                    tuple(values),
                    keys=("bot", "tools", "keyword"),
                    count="successes",
                )
                await db.execute(statement, values)
            if keep is not None:
                await _prune(db, bot, keep, spare=(joined, written))

    async def find_sequences(
        self, bot: str, keywords: Sequence[str], *, limit: int, proven: int | None = None
    ) -> list[PlaybookEntry]:
        """The bot's sequences recorded with any of `keywords`, the proven first, best first."""
        if not keywords or limit < 1:
            return []
        query = _FIND if proven is None else _FIND_PROVEN
        parameters = {"bot": bot, "keywords": sorted(set(keywords)), "limit": limit}
        if proven is not None:
            parameters["proven"] = proven
        async with self._read(f"find tool sequences of {bot!r}") as db:
            rows = (await db.execute(query, parameters)).all()
        return [
            PlaybookEntry(
                tools=tuple(row.tools.split()), matched=row.matched, successes=row.successes
            )
            for row in rows
        ]

    async def list_sequences(self, bot: str, *, limit: int) -> list[PlaybookSequence]:
        """The bot's sequences, the most successful first, then the newest."""
        check_limit(limit)
        successes, newest = func.max(_p.successes), func.max(_p.updated_at)
        query = (
            select(_p.tools, func.count().label("keywords"), successes, newest)
            .where(_p.bot == bot)
            .group_by(_p.tools)
            .order_by(successes.desc(), newest.desc(), _p.tools)
            .limit(limit)
        )
        async with self._read(f"list the playbook of {bot!r}") as db:
            rows = (await db.execute(query)).all()
        return [
            PlaybookSequence(
                tools=tuple(tools.split()),
                keywords=keywords,
                successes=most,
                updated_at=from_utc_text(last),
            )
            for tools, keywords, most, last in rows
        ]

    async def clear_playbook(self, bot: str) -> int:
        """Delete every record of the bot's playbook; how many rows went."""
        async with self._begin(f"clear the playbook of {bot!r}") as db:
            deleted = await db.execute(delete(playbook).where(_p.bot == bot))
            return int(deleted.rowcount)


async def _prune(db: AsyncConnection, bot: str, keep: int, *, spare: tuple[str, list[str]]) -> None:
    """Delete the bot's rows beyond `keep`, the fewest successes and then the oldest first,
    sparing the rows of `spare` (tools, keywords): a new sequence is not pruned in the very
    write that records it. A count by the primary key's prefix, and a delete only when over."""
    rows = await db.scalar(_ROWS_OF, {"bot": bot})
    over = int(rows or 0) - keep
    if over <= 0:
        return
    tools, keywords = spare
    doomed = (
        select(_p.tools, _p.keyword)
        .where(_p.bot == bot, not_(and_(_p.tools == tools, _p.keyword.in_(keywords))))
        .order_by(_p.successes, _p.updated_at, _p.tools, _p.keyword)
        .limit(over)
    )
    await db.execute(
        delete(playbook).where(_p.bot == bot, tuple_(_p.tools, _p.keyword).in_(doomed))
    )
