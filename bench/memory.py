"""Memory: recall at 5 of keyword search against hybrid search, on a small labelled set.

`bench/memory_set.json` holds 40 facts of one person and 22 questions, each with the facts
that answer it. The facts go into a real SQLite store through `HybridFacts` (each embedded on
the way in); each question is asked of the store's keyword search (as without `[embeddings]`)
and of `HybridFacts` (keyword and cosine similarity, reciprocal rank fusion). Recall at 5: the
share of a question's answering facts among the first five found, averaged over questions.

The embeddings come from the fake `/v1/embeddings` server of `tests/fakes/embeddings_api.py`
through the real `openai` client, so it runs without a network and the figure is the same on
every run. Those vectors are a bag of words with a small hand-written synonym table, NOT a
language model: the figure measures the fusion and its plumbing on questions phrased with
other words than the facts, not how well a real embedding model would find them
(docs/memory.md).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import console, table

SET = Path(__file__).with_name("memory_set.json")
SCOPE = "bench:terminal:1"
MODEL = "fake-bag-of-words"
K = 5


def recall_at(found: list[str], answers: list[str], k: int = K) -> float:
    """The share of `answers` among the first `k` of `found`."""
    return len(set(found[:k]) & set(answers)) / len(answers)


async def _measure() -> dict[str, Any]:
    from core.backends.sql.store import SqlStore, sqlite_url
    from core.embeddings import OpenAIEmbedder
    from core.facts import MemoryFact
    from core.hybrid_facts import HybridFacts
    from tests.fakes.embeddings_api import FakeEmbeddings

    labelled = json.loads(SET.read_text())
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as folder:
        store = await SqlStore.open(sqlite_url(Path(folder) / "memory.db"))
        try:
            async with FakeEmbeddings(api_key=None) as fake:
                embedder = OpenAIEmbedder(api_key=None, base_url=fake.url, model=MODEL)
                hybrid = HybridFacts(store, embedder, min_similarity=0.3)
                try:
                    for number, (fact_id, text) in enumerate(labelled["facts"].items()):
                        moment = start + timedelta(minutes=number)
                        fact = MemoryFact(id=fact_id, scope=SCOPE, text=text, created_at=moment)
                        await hybrid.remember_fact(fact)
                    rows = []
                    for question in labelled["questions"]:
                        keyword = await store.search_facts(SCOPE, question["ask"], limit=K)
                        fused = await hybrid.search_facts(SCOPE, question["ask"], limit=K)
                        rows.append(
                            {
                                "ask": question["ask"],
                                "answers": question["answers"],
                                "keyword": [f.id for f in keyword],
                                "hybrid": [f.id for f in fused],
                            }
                        )
                finally:
                    await embedder.aclose()
        finally:
            await store.close()
    return {"facts": len(labelled["facts"]), "questions": rows}


def memory() -> dict[str, Any]:
    """Run the set, print each question's recall and the averages; the figures as JSON."""
    measured = asyncio.run(_measure())
    rows = measured["questions"]
    for row in rows:
        row["keyword_recall"] = recall_at(row["keyword"], row["answers"])
        row["hybrid_recall"] = recall_at(row["hybrid"], row["answers"])
    keyword = sum(r["keyword_recall"] for r in rows) / len(rows)
    hybrid = sum(r["hybrid_recall"] for r in rows) / len(rows)
    table(
        f"memory: recall@{K}, {measured['facts']} facts, {len(rows)} questions",
        ["question", "answers", "keyword", "hybrid"],
        [[r["ask"], " ".join(r["answers"]), r["keyword_recall"], r["hybrid_recall"]] for r in rows],
    )
    console.print(
        f"recall@{K}: keyword {keyword:.2f}, hybrid {hybrid:.2f} "
        "(fake bag-of-words embeddings with a synonym table: this measures the fusion, "
        "not a real embedding model; docs/memory.md)"
    )
    return {
        "k": K,
        "facts": measured["facts"],
        "embeddings": "tests/fakes/embeddings_api.py (bag of words + synonym table, a fake)",
        "recall_keyword": keyword,
        "recall_hybrid": hybrid,
        "questions": rows,
    }
