"""Where a remembered fact came from (`MemoryFact.source`, column `memory_facts.source` of
migration 0010), kept by every store.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import timedelta

from core.embeddings import Embedding
from core.facts import MemoryFact
from core.store import FactStore
from tests.contract.store_support import START

ALICE = "default:telegram:1"


def _fact(fact_id: str, text: str, **extra: object) -> MemoryFact:
    return MemoryFact.model_validate(
        {"id": fact_id, "scope": ALICE, "text": text, "created_at": START, **extra}
    )


async def test_a_fact_keeps_its_source_in_every_read(store: FactStore) -> None:
    told = _fact("t1", "Has a dog called Rex", source_session="s-1")
    found = MemoryFact.model_validate(
        {
            "id": "c1",
            "scope": ALICE,
            "text": "Works as a nurse in Lyon",
            "created_at": START + timedelta(minutes=1),
            "source_session": "s-2",
            "source": "consolidated",
        }
    )
    await store.remember_fact(told)
    await store.remember_fact(found, embedding=Embedding("m", (1.0, 0.0)))

    assert await store.list_facts(ALICE) == [found, told]
    assert await store.search_facts(ALICE, "nurse") == [found]
    assert await store.search_facts(ALICE, "") == [found, told]
    ((embedded, _),) = await store.fact_embeddings(ALICE, "m")
    assert embedded.source == "consolidated" and embedded.source_session == "s-2"
    assert (await store.search_facts(ALICE, "dog"))[0].source == "tool"


async def test_a_fact_given_no_source_is_the_tools(store: FactStore) -> None:
    await store.remember_fact(_fact("t1", "Likes tea"))

    (fact,) = await store.list_facts(ALICE)

    assert fact.source == "tool"
