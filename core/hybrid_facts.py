"""Hybrid memory retrieval: facts ranked by keyword search and embedding similarity together.

`HybridFacts` is a `FactStore` over another: it embeds each fact as it is remembered, and a
search asks the database's full-text index for its keyword ranking, ranks the person's facts by
cosine similarity to the question in Python (one person keeps at most a few hundred facts), and
fuses the two rankings by reciprocal rank fusion:

    score(fact) = sum over the rankings r that hold the fact of 1 / (k + rank_r(fact))

with ranks from 1 and k = 60 (Cormack, Clarke and Büttcher, SIGIR 2009). A fact first in
both rankings scores 2/61; first in one only, 1/61; so agreement between the two beats either
alone, and no score scale has to be calibrated between BM25 and cosine. Ties keep the keyword
ranking's order, then the similarity ranking's.

A fact whose embedding failed, or that was remembered before embeddings were configured, is in
the keyword ranking only. A question the endpoint cannot embed is answered by keyword alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Final

from core.embeddings import Embedder, Embedding, EmbeddingFailed, cosine_similarity
from core.facts import MemoryFact, MemoryQuery
from core.store.facts import FactStore

__all__ = ["RRF_K", "HybridFacts", "reciprocal_rank_fusion", "similarity_ranking"]

log = logging.getLogger(__name__)

# The k of reciprocal rank fusion: how much a rank past the first still counts.
RRF_K: Final = 60
# Each ranking offers at most this many facts to the fusion.
_CANDIDATES: Final = 50


def reciprocal_rank_fusion(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """The ids of all `rankings` (each best first), best fused score first (see the module).
    Ties keep the order of first appearance, the rankings read in the order given."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, fact_id in enumerate(dict.fromkeys(ranking), start=1):
            scores[fact_id] = scores.get(fact_id, 0.0) + 1.0 / (k + rank)
    # sorted is stable: equal scores stay in order of first appearance.
    return sorted(scores, key=lambda fact_id: -scores[fact_id])


def similarity_ranking(
    question: Sequence[float],
    facts: Sequence[tuple[MemoryFact, Embedding]],
    *,
    min_similarity: float,
    limit: int = _CANDIDATES,
) -> list[MemoryFact]:
    """The `facts` at least `min_similarity` similar to `question` (cosine), most similar first
    (equal ones in the order given), at most `limit`."""
    scored = [(cosine_similarity(question, e.vector), fact) for fact, e in facts]
    kept = [(score, fact) for score, fact in scored if score >= min_similarity]
    kept.sort(key=lambda pair: -pair[0])
    return [fact for _, fact in kept[:limit]]


class HybridFacts:
    """A `FactStore` that ranks facts by keyword and by embedding similarity together; what it
    does not rank it hands to `store` as it is."""

    def __init__(self, store: FactStore, embedder: Embedder, *, min_similarity: float) -> None:
        self.store = store
        self.embedder = embedder
        self.min_similarity = min_similarity

    async def remember_fact(self, fact: MemoryFact, *, embedding: Embedding | None = None) -> None:
        """Store `fact` with its embedding; if the endpoint fails, without (keyword only)."""
        if embedding is None:
            embedding = await self._embedding(fact.text, f"fact {fact.id}")
        await self.store.remember_fact(fact, embedding=embedding)

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` best matching `query` by keyword and similarity fused; the
        newest when `query` has no search terms, by keyword alone when it cannot be embedded."""
        if MemoryQuery.parse(query).empty:
            return await self.store.search_facts(scope, query, limit=limit)
        keyword = await self.store.search_facts(scope, query, limit=max(limit, _CANDIDATES))
        asked = await self._embedding(query, "a memory search")
        if asked is None:
            return keyword[:limit]
        embedded = await self.store.fact_embeddings(scope, asked.model)
        # Off the event loop: a few hundred vectors of a thousand or more dimensions.
        similar = await asyncio.to_thread(
            similarity_ranking, asked.vector, embedded, min_similarity=self.min_similarity
        )
        found = {fact.id: fact for fact in (*similar, *keyword)}
        fused = reciprocal_rank_fusion([f.id for f in keyword], [f.id for f in similar])
        return [found[fact_id] for fact_id in fused[:limit]]

    async def fact_embeddings(self, scope: str, model: str) -> list[tuple[MemoryFact, Embedding]]:
        """As the store's."""
        return await self.store.fact_embeddings(scope, model)

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """As the store's."""
        return await self.store.list_facts(scope, limit=limit)

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """As the store's."""
        return await self.store.forget_fact(scope, fact_id)

    async def _embedding(self, text: str, what: str) -> Embedding | None:
        try:
            (embedding,) = await self.embedder.embed([text])
        except EmbeddingFailed as exc:
            log.warning("no embedding for %s, keyword search only: %s", what, exc)
            return None
        return embedding
