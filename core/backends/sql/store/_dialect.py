"""What differs between SQLite and PostgreSQL, in one place: upserts and full-text search.

Everything else the store says in portable SQLAlchemy Core. `name` is the engine's dialect
name (`"sqlite"` or `"postgresql"`).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    String,
    Table,
    bindparam,
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
    "fact_search",
    "indexed_terms",
    "insert_ignoring",
    "lock_for_transaction",
    "upsert",
    "upsert_counting",
]

_FTS = table("memory_fts", column("rowid"))
_FACT_COLUMNS: Final = (
    memory_facts.c.id,
    memory_facts.c.scope,
    memory_facts.c.text,
    memory_facts.c.created_at,
    memory_facts.c.source_session,
    memory_facts.c.source,
)
_NEWEST: Final = (memory_facts.c.created_at.desc(), memory_facts.c.id.desc())
_FTS5_INDEX: Final[ColumnElement[Any]] = literal_column("memory_fts")
# Built once: SQLite's search has one shape whatever the query (its terms are one parameter).
_FTS5_SEARCH: Final = (
    select(*_FACT_COLUMNS)
    .select_from(memory_facts.join(_FTS, _FTS.c.rowid == memory_facts.c.number))
    .where(
        _FTS5_INDEX.op("MATCH")(bindparam("match", type_=String)),
        memory_facts.c.scope == bindparam("scope"),
    )
    .order_by(func.bm25(_FTS5_INDEX), *_NEWEST)
    .limit(bindparam("limit", type_=Integer))
)


def _insert(name: str, target: Table) -> postgresql.Insert | sqlite.Insert:
    return postgresql.insert(target) if name == "postgresql" else sqlite.insert(target)


# The builders below are cached: each statement is built once per dialect, table and shape,
# and executed with its values as parameters (`db.execute(statement, values)`), so SQLAlchemy
# neither builds it again nor computes its cache key on every call (about three quarters of a
# statement's cost on SQLite, docs/performance.md).


@cache
def insert_ignoring(name: str, target: Table) -> Insert:
    """INSERT the values it is executed with, or nothing when a row with the same key exists."""
    return _insert(name, target).on_conflict_do_nothing()


@cache
def upsert(
    name: str,
    target: Table,
    columns: tuple[str, ...],
    *,
    keys: tuple[str, ...],
    newer: str | None = None,
) -> Insert:
    """INSERT the values it is executed with (`columns`), or update the row with the same
    `keys` to them; with `newer`, only where the proposed row's `newer` column is greater
    than the stored row's."""
    statement = _insert(name, target)
    proposed = statement.excluded
    changes = {column: proposed[column] for column in columns if column not in keys}
    return statement.on_conflict_do_update(
        index_elements=list(keys),
        set_=changes,
        where=None if newer is None else proposed[newer] > target.c[newer],
    )


@cache
def upsert_counting(
    name: str, target: Table, columns: tuple[str, ...], *, keys: tuple[str, ...], count: str
) -> Insert:
    """INSERT the values it is executed with (`columns`), or add the proposed `count` to the
    row with the same `keys` and set its other columns to the proposed ones (one statement:
    concurrent writers both count)."""
    statement = _insert(name, target)
    proposed = statement.excluded
    changes: dict[str, Any] = {
        column: proposed[column] for column in columns if column not in keys and column != count
    }
    changes[count] = target.c[count] + proposed[count]
    return statement.on_conflict_do_update(index_elements=list(keys), set_=changes)


def indexed_terms(fact_text: str) -> str:
    """What PostgreSQL's `tsvector` of a fact is made from: its search terms, folded as
    SQLite's FTS5 tokenizer folds them (`core.facts.search_terms`)."""
    return " ".join(search_terms(fact_text))


def fact_search(
    name: str, scope: str, query: MemoryQuery, limit: int
) -> tuple[Select[Any], dict[str, Any]]:
    """The facts of `scope` matching any of `query`'s terms (its prefix as a prefix), best
    match first, then newest first, with its parameters; `query` must not be empty."""
    f = memory_facts
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
        statement = (
            select(*_FACT_COLUMNS)
            .where(f.c.scope == scope, search.op("@@")(wanted))
            .order_by(func.ts_rank(search, wanted).desc(), *_NEWEST)
            .limit(limit)
        )
        return statement, {}
    # FTS5 never sees the asker's text as syntax: each term is quoted as a string.
    phrases = [_quoted(term) for term in query.terms]
    if query.prefix is not None:
        phrases.append(f"{_quoted(query.prefix)}*")
    return _FTS5_SEARCH, {"match": " OR ".join(phrases), "scope": scope, "limit": limit}


def _quoted(term: str) -> str:
    """An FTS5 string: whatever `term` holds is text to match, never query syntax."""
    return '"' + term.replace('"', '""') + '"'


async def lock_for_transaction(name: str, connection: AsyncConnection, key: str) -> None:
    """Hold `key` until the transaction ends, against other transactions locking it (on
    PostgreSQL an advisory lock; SQLite's `BEGIN IMMEDIATE` already serialises writers)."""
    if name == "postgresql":
        await connection.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))
