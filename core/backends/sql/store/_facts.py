"""The `FactStore` of `SqlStore`: remembered facts, searched by the database's full-text
index (`_dialect.fact_search`: FTS5 on SQLite, a `tsvector` on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import fact_search, indexed_terms, insert_ignoring
from core.backends.sql.store._tables import memory_facts
from core.embeddings import Embedding, pack_vector, unpack_vector
from core.errors import StoreError
from core.facts import MemoryFact, MemoryQuery
from core.store._shared import check_aware, check_limit, from_utc_text, utc_text

__all__ = ["SqlFacts"]

f = memory_facts.c
_COLUMNS = (f.id, f.scope, f.text, f.created_at, f.source_session, f.source)


def _fact(row: Sequence[Any]) -> MemoryFact:
    fact_id, scope, text, created_at, source_session, source = row
    return MemoryFact(
        id=fact_id,
        scope=scope,
        text=text,
        created_at=from_utc_text(created_at),
        source_session=source_session,
        source=source,
    )


def _newest(scope: str, limit: int) -> Any:
    return (
        select(*_COLUMNS)
        .where(f.scope == scope)
        .order_by(f.created_at.desc(), f.id.desc())
        .limit(limit)
    )


class SqlFacts(SqlBase):
    """The `FactStore` of `SqlStore`."""

    async def remember_fact(self, fact: MemoryFact, *, embedding: Embedding | None = None) -> None:
        """Store a fact (with its `embedding`, if any) in its scope; the same fact again changes
        nothing.

        Raises `StoreError` for another fact with an id the scope holds, or a naive time.
        """
        check_aware(fact, f"fact {fact.id!r}")
        row = (fact.text, utc_text(fact.created_at), fact.source_session)
        values = {
            "scope": fact.scope,
            "id": fact.id,
            "text": fact.text,
            "terms": indexed_terms(fact.text),
            "created_at": row[1],
            "source_session": fact.source_session,
            "source": fact.source,
            "embedding": None if embedding is None else pack_vector(embedding.vector),
            "embedding_model": None if embedding is None else embedding.model,
        }
        async with self._begin(f"remember fact {fact.id!r} of {fact.scope!r}") as db:
            inserted = await db.execute(insert_ignoring(self._dialect, memory_facts), values)
            if inserted.rowcount == 1:
                return
            stored = await db.execute(
                select(f.text, f.created_at, f.source_session).where(
                    f.scope == fact.scope, f.id == fact.id
                )
            )
            if [tuple(found) for found in stored] != [row]:
                raise StoreError(
                    f"scope {fact.scope!r} already holds another fact with id {fact.id!r}"
                )

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` best matching `query`, or the newest without terms."""
        check_limit(limit)
        parsed = MemoryQuery.parse(query)
        statement, parameters = (
            (_newest(scope, limit), {})
            if parsed.empty
            else fact_search(self._dialect, scope, parsed, limit)
        )
        async with self._read(f"search the facts of {scope!r}") as db:
            return [_fact(row) for row in await db.execute(statement, parameters)]

    async def fact_embeddings(self, scope: str, model: str) -> list[tuple[MemoryFact, Embedding]]:
        """The facts of `scope` with an embedding of `model`, newest first, each with it."""
        statement = (
            select(*_COLUMNS, f.embedding)
            .where(f.scope == scope, f.embedding_model == model, f.embedding.is_not(None))
            .order_by(f.created_at.desc(), f.id.desc())
        )
        async with self._read(f"read the fact embeddings of {scope!r}") as db:
            rows = list(await db.execute(statement))
        return [(_fact(row[:-1]), Embedding(model, unpack_vector(row[-1]))) for row in rows]

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest first."""
        check_limit(limit)
        async with self._read(f"list the facts of {scope!r}") as db:
            return [_fact(row) for row in await db.execute(_newest(scope, limit))]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        async with self._begin(f"forget fact {fact_id!r} of {scope!r}") as db:
            deleted = await db.execute(
                delete(memory_facts).where(f.scope == scope, f.id == fact_id)
            )
            return deleted.rowcount == 1
