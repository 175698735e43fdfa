"""The remembered-facts contract (`FactStore`).

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.errors import StoreError
from core.facts import MAX_FACT_CHARS, MemoryFact
from core.store import (
    FactStore,
)
from tests.contract.store_support import START, is_utc

# Remembered facts

ALICE = "default:telegram:1"
BOB = "default:telegram:2"


def _fact(
    fact_id: str, text: str, *, scope: str = ALICE, minutes: int = 0, session: str | None = "s1"
) -> MemoryFact:
    return MemoryFact(
        id=fact_id,
        scope=scope,
        text=text,
        created_at=START + timedelta(minutes=minutes),
        source_session=session,
    )


async def _remember(store: FactStore, *facts: MemoryFact) -> None:
    for fact in facts:
        await store.remember_fact(fact)


def _ids(facts: list[MemoryFact]) -> list[str]:
    return [f.id for f in facts]


async def test_remembered_facts_list_newest_first_up_to_limit(store: FactStore) -> None:
    tokyo = datetime.fromisoformat("2025-03-01T21:30:00+09:00")  # 12:30 UTC
    await _remember(
        store,
        _fact("f1", "Likes green tea", minutes=10),
        _fact("f2", "Lives in Lyon", minutes=40, session=None),
        _fact("f3", "Has a dog called Rex").model_copy(update={"created_at": tokyo}),
    )

    listed = await store.list_facts(ALICE)

    assert _ids(listed) == ["f2", "f3", "f1"]
    assert listed[0] == _fact("f2", "Lives in Lyon", minutes=40, session=None)
    assert listed[1].created_at == tokyo and is_utc(listed[1].created_at)
    assert _ids(await store.list_facts(ALICE, limit=2)) == ["f2", "f3"]
    assert await store.list_facts(ALICE, limit=0) == []
    assert await store.list_facts("default:telegram:nobody") == []


async def test_facts_of_equal_times_list_greater_id_first(store: FactStore) -> None:
    await _remember(store, _fact("a", "one"), _fact("c", "three"), _fact("b", "two"))

    assert _ids(await store.list_facts(ALICE)) == ["c", "b", "a"]


async def test_facts_never_leave_their_scope(store: FactStore) -> None:
    other_bot = "helper:telegram:1"
    await _remember(
        store,
        _fact("a1", "Favourite colour is blue"),
        _fact("b1", "Favourite colour is red", scope=BOB),
        _fact("h1", "Favourite colour is green", scope=other_bot),
    )

    assert _ids(await store.search_facts(ALICE, "favourite colour")) == ["a1"]
    assert _ids(await store.search_facts(BOB, "colour")) == ["b1"]
    assert _ids(await store.search_facts(other_bot, "colo")) == ["h1"]
    assert _ids(await store.list_facts(BOB)) == ["b1"]
    assert await store.search_facts(ALICE, "red") == []


async def test_search_ranks_facts_matching_more_terms_first(store: FactStore) -> None:
    await _remember(
        store,
        _fact("both", "Drinks coffee with oat milk every morning", minutes=1),
        _fact("coffee", "Coffee gives them headaches", minutes=2),
        _fact("tea", "Prefers tea in the evening", minutes=3),
    )

    found = await store.search_facts(ALICE, "Do they take oat milk in their coffee?")

    assert _ids(found) == ["both", "coffee"]
    assert _ids(await store.search_facts(ALICE, "oat milk coffee", limit=1)) == ["both"]
    assert await store.search_facts(ALICE, "coffee", limit=0) == []


async def test_search_ties_go_newest_first(store: FactStore) -> None:
    await _remember(
        store,
        _fact("old", "The cat is called Tom", minutes=1),
        _fact("new", "The cat is called Bob", minutes=2),
    )

    assert _ids(await store.search_facts(ALICE, "cat")) == ["new", "old"]


async def test_search_without_terms_lists_the_newest_facts(store: FactStore) -> None:
    await _remember(
        store,
        _fact("f1", "Speaks Italian", minutes=1),
        _fact("f2", "Works nights", minutes=2),
        _fact("f3", "It is what it is", minutes=3),
    )

    for query in ("", "   ", "what is it?", "a", "!!! -- ***"):
        assert _ids(await store.search_facts(ALICE, query, limit=2)) == ["f3", "f2"], query
    assert _ids(await store.search_facts(ALICE, "what")) == ["f3", "f2", "f1"]


async def test_the_last_search_term_also_matches_as_a_prefix(store: FactStore) -> None:
    await _remember(
        store,
        _fact("coffee", "Loves coffee", minutes=1),
        _fact("cola", "Drinks cola", minutes=2),
    )

    assert _ids(await store.search_facts(ALICE, "coff")) == ["coffee"]
    assert _ids(await store.search_facts(ALICE, "drinks col")) == ["cola"]
    # Only the last term, and only from three characters on.
    assert _ids(await store.search_facts(ALICE, "coff drinks")) == ["cola"]
    assert await store.search_facts(ALICE, "co") == []


async def test_search_folds_case_and_latin_diacritics(store: FactStore) -> None:
    await _remember(
        store,
        _fact("munich", "Lives in München", minutes=1),
        _fact("cafe", "Runs a CAFÉ near the station", minutes=2),
        _fact("moscow", "Was born in Москва", minutes=3),
        _fact("tokyo", "Visited 東京 last year", minutes=4),
    )

    assert _ids(await store.search_facts(ALICE, "munchen")) == ["munich"]
    assert _ids(await store.search_facts(ALICE, "MÜNCHEN")) == ["munich"]
    # The same word with its umlaut as a separate combining mark.
    assert _ids(await store.search_facts(ALICE, "Mu\u0308nchen")) == ["munich"]
    assert _ids(await store.search_facts(ALICE, "café")) == ["cafe"]
    assert _ids(await store.search_facts(ALICE, "cafe")) == ["cafe"]
    assert _ids(await store.search_facts(ALICE, "москва")) == ["moscow"]
    assert _ids(await store.search_facts(ALICE, "東京")) == ["tokyo"]
    [found] = await store.search_facts(ALICE, "munchen")
    assert found.text == "Lives in München"


async def test_query_syntax_is_searched_as_words(store: FactStore) -> None:
    await _remember(store, _fact("f1", 'Calls the "near" shop "Corner*Mart"', minutes=1))
    queries = [
        '"',
        '""',
        "*",
        "NEAR(",
        "NEAR(a b, 2)",
        "-",
        "- near",
        "near -shop",
        '" OR 1=1 --',
        "text: shop",
        "{text}: shop",
        "^shop",
        "(shop",
        "shop)",
        "shop AND",
        "OR",
        "NOT shop",
        "corner*",
        "\x00 shop",
    ]
    for query in queries:
        found = await store.search_facts(ALICE, query)
        assert _ids(found) == ["f1"], query
    assert await store.search_facts(ALICE, "'; DROP TABLE memory_facts; --") == []
    assert _ids(await store.list_facts(ALICE)) == ["f1"]


async def test_forget_works_only_within_the_scope(store: FactStore) -> None:
    await _remember(
        store,
        _fact("f1", "Allergic to peanuts", minutes=1),
        _fact("f2", "Allergic to cats", minutes=2),
        _fact("f1", "Allergic to peanuts", scope=BOB, minutes=1),
    )

    assert await store.forget_fact(BOB, "f2") is False
    assert await store.forget_fact(ALICE, "f1") is True
    assert await store.forget_fact(ALICE, "f1") is False
    assert await store.forget_fact(ALICE, "nosuchfact") is False

    assert _ids(await store.list_facts(ALICE)) == ["f2"]
    assert _ids(await store.search_facts(ALICE, "allergic peanuts")) == ["f2"]
    assert await store.search_facts(ALICE, "peanuts") == []
    assert await store.search_facts(ALICE, "pean") == []
    assert _ids(await store.search_facts(BOB, "peanuts")) == ["f1"]
    # A forgotten id can be used again.
    await store.remember_fact(_fact("f1", "Allergic to bees", minutes=3))
    assert _ids(await store.search_facts(ALICE, "bees")) == ["f1"]


async def test_a_fact_of_stop_words_only_is_kept_and_forgotten(store: FactStore) -> None:
    await store.remember_fact(_fact("f1", "It is what it is"))

    assert _ids(await store.list_facts(ALICE)) == ["f1"]
    assert await store.forget_fact(ALICE, "f1") is True
    assert await store.list_facts(ALICE) == []


async def test_remembering_a_fact_again_changes_nothing(store: FactStore) -> None:
    fact = _fact("f1", "Likes jazz")
    await store.remember_fact(fact)
    await store.remember_fact(fact)

    assert await store.list_facts(ALICE) == [fact]
    with pytest.raises(StoreError, match="f1"):
        await store.remember_fact(_fact("f1", "Likes techno"))
    assert await store.list_facts(ALICE) == [fact]
    assert _ids(await store.search_facts(ALICE, "jazz")) == ["f1"]
    assert await store.search_facts(ALICE, "techno") == []


async def test_long_facts_round_trip(store: FactStore) -> None:
    text = ("Notes: " + "ünïcödé words and numbers 12345 " * 40)[:MAX_FACT_CHARS]
    fact = _fact("long", text)
    await store.remember_fact(fact)

    assert await store.list_facts(ALICE) == [fact]
    assert _ids(await store.search_facts(ALICE, "unicode 12345")) == ["long"]


async def test_naive_fact_times_are_refused(store: FactStore) -> None:
    naive = datetime(2025, 3, 1, 12, 0)  # noqa: DTZ001
    with pytest.raises(StoreError, match="naive"):
        await store.remember_fact(_fact("f1", "x").model_copy(update={"created_at": naive}))

    assert await store.list_facts(ALICE) == []


async def test_negative_fact_limits_are_refused(store: FactStore) -> None:
    with pytest.raises(ValueError, match="limit"):
        await store.search_facts(ALICE, "x", limit=-1)
    with pytest.raises(ValueError, match="limit"):
        await store.list_facts(ALICE, limit=-1)
