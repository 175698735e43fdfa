"""What differs between SQLite and PostgreSQL, in one place: upserts and full-text search.

Everything else the store says in portable SQLAlchemy Core. `name` is the engine's dialect
name (`"sqlite"` or `"postgresql"`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnCollection,
    ColumnElement,
    Select,
    Table,
    column,
    func,
    literal_column,
    select,
    table,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from core.backends.sql.store._tables import memory_facts
from core.facts import MemoryQuery, search_terms

__all__ = [
    "Excluded",
    "fact_search",
    "indexed_terms",
    "insert_ignoring",
    "lock_for_transaction",
    "upsert",
    "upsert_counting",
]

# The proposed row of an upsert (`excluded.<column>` in both dialects).
Excluded = ColumnCollection[str, Any]

_FTS = table("memory_fts", column("rowid"))


def _insert(name: str, target: Table) -> postgresql.Insert | sqlite.Insert:
    return postgresql.insert(target) if name == "postgresql" else sqlite.insert(target)


def insert_ignoring(name: str, target: Table, values: Mapping[str, Any]) -> Insert:
    """INSERT `values`, or nothing when a row with the same key exists."""
    return _insert(name, target).values(**values).on_conflict_do_nothing()


def upsert(
    name: str,
    target: Table,
    values: Mapping[str, Any],
    *,
    keys: Sequence[str],
    where: Callable[[Excluded], ColumnElement[bool]] | None = None,
) -> Insert:
    """INSERT `values`, or update the row with the same `keys` to them; only where
    `where(excluded)` holds, when given (`excluded`: the proposed row)."""
    statement = _insert(name, target).values(**values)
    proposed = statement.excluded
    changes = {column: proposed[column] for column in values if column not in keys}
    return statement.on_conflict_do_update(
        index_elements=list(keys),
        set_=changes,
        where=None if where is None else where(proposed),
    )


def upsert_counting(
    name: str, target: Table, values: Mapping[str, Any], *, keys: Sequence[str], count: str
) -> Insert:
    """INSERT `values`, or add the proposed `count` to the row with the same `keys` and set
    its other columns to the proposed ones (one statement: concurrent writers both count)."""
    statement = _insert(name, target).values(**values)
    proposed = statement.excluded
    changes: dict[str, Any] = {
        column: proposed[column] for column in values if column not in keys and column != count
    }
    changes[count] = target.c[count] + proposed[count]
    return statement.on_conflict_do_update(index_elements=list(keys), set_=changes)


def indexed_terms(fact_text: str) -> str:
    """What PostgreSQL's `tsvector` of a fact is made from: its search terms, folded as
    SQLite's FTS5 tokenizer folds them (`core.facts.search_terms`)."""
    return " ".join(search_terms(fact_text))


def fact_search(name: str, scope: str, query: MemoryQuery, limit: int) -> Select[Any]:
    """The facts of `scope` matching any of `query`'s terms (its prefix as a prefix), best
    match first, then newest first; `query` must not be empty."""
    f = memory_facts
    columns = (f.c.id, f.c.scope, f.c.text, f.c.created_at, f.c.source_session, f.c.source)
    newest = (f.c.created_at.desc(), f.c.id.desc())
    if name == "postgresql":
        # Each term a query of its own (never parsed as query syntax), joined with OR.
        parts: list[ColumnElement[Any]] = [
            func.plainto_tsquery("simple", term) for term in query.terms
        ]
        if query.prefix is not None:
            parts.append(func.to_tsquery("simple", func.quote_literal(query.prefix) + ":*"))
        wanted = parts[0]
        for part in parts[1:]:
            wanted = wanted.op("||")(part)
        search: ColumnElement[Any] = literal_column("memory_facts.search")
        return (
            select(*columns)
            .where(f.c.scope == scope, search.op("@@")(wanted))
            .order_by(func.ts_rank(search, wanted).desc(), *newest)
            .limit(limit)
        )
    # FTS5 never sees the asker's text as syntax: each term is quoted as a string.
    phrases = [_quoted(term) for term in query.terms]
    if query.prefix is not None:
        phrases.append(f"{_quoted(query.prefix)}*")
    index: ColumnElement[Any] = literal_column("memory_fts")
    return (
        select(*columns)
        .select_from(f.join(_FTS, _FTS.c.rowid == f.c.number))
        .where(index.op("MATCH")(" OR ".join(phrases)), f.c.scope == scope)
        .order_by(func.bm25(index), *newest)
        .limit(limit)
    )


def _quoted(term: str) -> str:
    """An FTS5 string: whatever `term` holds is text to match, never query syntax."""
    return '"' + term.replace('"', '""') + '"'


async def lock_for_transaction(name: str, connection: AsyncConnection, key: str) -> None:
    """Hold `key` until the transaction ends, against other transactions locking it (on
    PostgreSQL an advisory lock; SQLite's `BEGIN IMMEDIATE` already serialises writers)."""
    if name == "postgresql":
        await connection.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))
