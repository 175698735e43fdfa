"""The embeddings kept with remembered facts (`FactStore.remember_fact(embedding=...)`,
`FactStore.fact_embeddings`), for hybrid search.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import timedelta

from core.embeddings import Embedding
from core.facts import MemoryFact
from core.store import FactStore
from tests.contract.store_support import START

ALICE = "default:telegram:1"
BOB = "default:telegram:2"
SMALL = "text-embedding-3-small"


def _fact(fact_id: str, text: str, *, scope: str = ALICE, minutes: int = 0) -> MemoryFact:
    return MemoryFact(
        id=fact_id, scope=scope, text=text, created_at=START + timedelta(minutes=minutes)
    )


def _ids(found: list[tuple[MemoryFact, Embedding]]) -> list[str]:
    return [fact.id for fact, _ in found]


async def test_a_fact_keeps_its_embedding_as_float32(store: FactStore) -> None:
    fact = _fact("f1", "Has a dog called Rex")
    # 0.1 is no float32: what comes back is the float32 nearest to it.
    await store.remember_fact(fact, embedding=Embedding(SMALL, (0.5, -0.25, 0.1)))

    ((found, embedding),) = await store.fact_embeddings(ALICE, SMALL)

    assert found == fact
    assert embedding.model == SMALL
    assert embedding.vector[:2] == (0.5, -0.25)
    assert abs(embedding.vector[2] - 0.1) < 1e-7 and embedding.vector[2] != 0.1


async def test_only_the_scopes_facts_with_that_models_embedding_newest_first(
    store: FactStore,
) -> None:
    await store.remember_fact(_fact("old", "Likes tea"), embedding=Embedding(SMALL, (1.0, 0.0)))
    await store.remember_fact(
        _fact("new", "Likes coffee", minutes=5), embedding=Embedding(SMALL, (0.0, 1.0))
    )
    await store.remember_fact(_fact("plain", "Lives in Lyon", minutes=9))
    await store.remember_fact(
        _fact("large", "Reads novels", minutes=7), embedding=Embedding("large", (1.0, 1.0, 1.0))
    )
    await store.remember_fact(
        _fact("bobs", "Likes tea", scope=BOB), embedding=Embedding(SMALL, (1.0, 0.0))
    )

    assert _ids(await store.fact_embeddings(ALICE, SMALL)) == ["new", "old"]
    assert _ids(await store.fact_embeddings(ALICE, "large")) == ["large"]
    assert _ids(await store.fact_embeddings(BOB, SMALL)) == ["bobs"]
    assert await store.fact_embeddings("default:telegram:3", SMALL) == []
    # The embedding changes nothing else: keyword search and listing find every fact.
    assert {f.id for f in await store.list_facts(ALICE)} == {"old", "new", "plain", "large"}
    assert [f.id for f in await store.search_facts(ALICE, "tea")] == ["old"]


async def test_a_forgotten_facts_embedding_goes_with_it(store: FactStore) -> None:
    await store.remember_fact(_fact("f1", "Likes tea"), embedding=Embedding(SMALL, (1.0,)))

    assert await store.forget_fact(ALICE, "f1")

    assert await store.fact_embeddings(ALICE, SMALL) == []


async def test_remembering_the_same_fact_again_keeps_the_first_embedding(
    store: FactStore,
) -> None:
    fact = _fact("f1", "Likes tea")
    await store.remember_fact(fact, embedding=Embedding(SMALL, (1.0, 0.0)))
    await store.remember_fact(fact, embedding=Embedding(SMALL, (0.0, 1.0)))
    await store.remember_fact(fact)

    ((_, embedding),) = await store.fact_embeddings(ALICE, SMALL)
    assert embedding.vector == (1.0, 0.0)
