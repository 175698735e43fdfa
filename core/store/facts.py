"""Remembered facts, per scope, found again by full-text search (see `core/facts.py`)."""

from __future__ import annotations

from typing import Protocol

from core.embeddings import Embedding
from core.facts import MemoryFact

__all__ = ["FactStore"]


class FactStore(Protocol):
    """The facts people asked the bot to remember."""

    async def remember_fact(self, fact: MemoryFact, *, embedding: Embedding | None = None) -> None:
        """Store a fact in its scope, with its `embedding` when there is one.

        Storing the same fact again changes nothing (a retried write is harmless); a different
        fact with an id its scope already holds raises `StoreError`, as does a naive time.
        """
        ...

    async def fact_embeddings(self, scope: str, model: str) -> list[tuple[MemoryFact, Embedding]]:
        """The facts of `scope` stored with an embedding of `model`, each with it, newest
        first (facts without one, or with another model's, are left out)."""
        ...

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` that share terms with `query` (see `core.facts.MemoryQuery`),
        best matches first; a query without search terms lists the newest facts."""
        ...

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest (by `created_at`, then id) first."""
        ...

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        ...
