"""The `FactStore` of `SqliteStore`: remembered facts (tables of schema version 4).

`memory_facts` holds the facts; `memory_fts`, an FTS5 index over their text kept in step by
triggers, finds them. Searches never pass the asker's text to FTS5 as syntax: the query is
rebuilt from `MemoryQuery` terms, each quoted as a string, joined with OR, ranked by `bm25`.

Each method runs its SQL under the connection's lock (`_sqlite_base.py`); `_list_facts` also
serves `search_facts` inside its read.
"""

from __future__ import annotations

from typing import Any, Final

import aiosqlite

from core.errors import StoreError
from core.facts import MemoryFact, MemoryQuery
from core.store._shared import check_aware, check_limit, from_utc_text, utc_text
from core.store._sqlite_base import SqliteBase

__all__ = ["MIGRATION", "SqliteFacts"]

# Schema version 4. `number` is the FTS index's rowid: an INTEGER PRIMARY KEY keeps it stable,
# where a table's implicit rowid may change on VACUUM and leave the index pointing elsewhere.
# A fact is known by its scope and id together.
MIGRATION: Final = (
    """
    CREATE TABLE memory_facts (
        number INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL,
        source_session TEXT,
        UNIQUE (scope, id)
    )
    """,
    "CREATE INDEX memory_facts_by_age ON memory_facts (scope, created_at, id)",
    # External content: the index keeps only its terms and reads the text from memory_facts.
    """
    CREATE VIRTUAL TABLE memory_fts USING fts5 (
        text,
        content = 'memory_facts',
        content_rowid = 'number',
        tokenize = 'unicode61 remove_diacritics 2',
        prefix = '3'
    )
    """,
    """
    CREATE TRIGGER memory_facts_indexed AFTER INSERT ON memory_facts BEGIN
        INSERT INTO memory_fts (rowid, text) VALUES (new.number, new.text);
    END
    """,
    """
    CREATE TRIGGER memory_facts_unindexed AFTER DELETE ON memory_facts BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.number, old.text);
    END
    """,
    """
    CREATE TRIGGER memory_facts_reindexed AFTER UPDATE OF text ON memory_facts BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.number, old.text);
        INSERT INTO memory_fts (rowid, text) VALUES (new.number, new.text);
    END
    """,
)

_COLUMNS: Final = "f.id, f.scope, f.text, f.created_at, f.source_session"
_NEWEST_FIRST: Final = "ORDER BY f.created_at DESC, f.id DESC"


async def _list_facts(db: aiosqlite.Connection, scope: str, limit: int) -> list[MemoryFact]:
    """The scope's newest facts first."""
    rows = await db.execute_fetchall(
        f"SELECT {_COLUMNS} FROM memory_facts AS f WHERE f.scope = ? {_NEWEST_FIRST} LIMIT ?",
        (scope, limit),
    )
    return [_fact(row) for row in rows]


def _quoted(term: str) -> str:
    """An FTS5 string: whatever `term` holds is text to match, never query syntax."""
    return '"' + term.replace('"', '""') + '"'


def _fact(row: Any) -> MemoryFact:
    fact_id, scope, text, created_at, source_session = row
    return MemoryFact(
        id=fact_id,
        scope=scope,
        text=text,
        created_at=from_utc_text(created_at),
        source_session=source_session,
    )


class SqliteFacts(SqliteBase):
    """The `FactStore` of `SqliteStore`."""

    async def remember_fact(self, fact: MemoryFact) -> None:
        """Store a fact in its scope; the same fact again changes nothing.

        Raises `StoreError` for another fact with an id the scope holds, or a naive time.
        """
        check_aware(fact, f"fact {fact.id!r}")
        async with self._write(f"remember fact {fact.id!r} of {fact.scope!r}"):
            row = (fact.text, utc_text(fact.created_at), fact.source_session)
            cursor = await self._db.execute(
                "INSERT INTO memory_facts (scope, id, text, created_at, source_session)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, id) DO NOTHING",
                (fact.scope, fact.id, *row),
            )
            if cursor.rowcount == 1:
                return
            stored = await self._db.execute_fetchall(
                "SELECT text, created_at, source_session FROM memory_facts"
                " WHERE scope = ? AND id = ?",
                (fact.scope, fact.id),
            )
            if [tuple(r) for r in stored] != [row]:
                raise StoreError(
                    f"scope {fact.scope!r} already holds another fact with id {fact.id!r}"
                )

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` best matching `query` (by `bm25`), or the newest without terms."""
        check_limit(limit)
        async with self._read(f"search the facts of {scope!r}"):
            parsed = MemoryQuery.parse(query)
            if parsed.empty:
                return await _list_facts(self._db, scope, limit)
            phrases = [_quoted(term) for term in parsed.terms]
            if parsed.prefix is not None:
                phrases.append(f"{_quoted(parsed.prefix)}*")
            rows = await self._db.execute_fetchall(
                f"SELECT {_COLUMNS} FROM memory_fts JOIN memory_facts AS f"
                " ON f.number = memory_fts.rowid"
                " WHERE memory_fts MATCH ? AND f.scope = ?"
                " ORDER BY bm25(memory_fts), f.created_at DESC, f.id DESC LIMIT ?",
                (" OR ".join(phrases), scope, limit),
            )
            return [_fact(row) for row in rows]

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest first."""
        check_limit(limit)
        async with self._read(f"list the facts of {scope!r}"):
            return await _list_facts(self._db, scope, limit)

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        async with self._write(f"forget fact {fact_id!r} of {scope!r}"):
            cursor = await self._db.execute(
                "DELETE FROM memory_facts WHERE scope = ? AND id = ?", (scope, fact_id)
            )
            return cursor.rowcount == 1
