"""Memory's pure parts: scopes, search terms, queries, and the per-turn memory block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.facts import (
    MEMORY_HEADING,
    MemoryFact,
    MemoryQuery,
    memory_block,
    memory_scope,
    search_terms,
)
from core.store import Store

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = "default:telegram:1"


async def _remember(store: Store, *texts: str) -> None:
    for number, text in enumerate(texts):
        await store.remember_fact(
            MemoryFact(
                id=f"f{number}",
                scope=SCOPE,
                text=text,
                created_at=NOW + timedelta(minutes=number),
            )
        )


def test_a_scope_names_profile_platform_and_user() -> None:
    assert memory_scope("default", "slack", "T1:U2") == "default:slack:T1:U2"
    # A scheduled run's user is its owner, `platform:user_id`.
    assert memory_scope("default", "slack", "slack:T1:U2", scheduled=True) == "default:slack:T1:U2"
    assert memory_scope("default", "slack", "cli", scheduled=True) == "default:slack:cli"
    for parts in (("", "slack", "U2"), ("default", "", "U2"), ("default", "slack", "")):
        with pytest.raises(ValueError, match="scope"):
            memory_scope(*parts)


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Lives in MÜNCHEN, near the Café", ["lives", "munchen", "near", "cafe"]),
        ("Mu\u0308nchen", ["munchen"]),
        ("İstanbul", ["istanbul"]),
        # Greek and Cyrillic keep their marks, as SQLite's unicode61 tokenizer does.
        ("Ελληνικά Йошкар", ["ελληνικά", "йошкар"]),
        ('"NEAR(a b)" -x *y OR z AND col:umn', ["near", "col", "umn"]),
        ("a the it is what", []),
        ("snake_case e-mail 42 7", ["snake", "case", "mail", "42"]),
        ("cat cat CAT", ["cat"]),
    ],
)
def test_search_terms(text: str, terms: list[str]) -> None:
    assert search_terms(text) == terms


def test_a_query_takes_its_last_long_term_as_a_prefix() -> None:
    assert MemoryQuery.parse("my coffee order") == MemoryQuery(("coffee",), "order")
    assert MemoryQuery.parse("coffee ok") == MemoryQuery(("coffee", "ok"), None)
    assert MemoryQuery.parse("the") == MemoryQuery((), None)
    assert MemoryQuery.parse("the").empty and not MemoryQuery.parse("ok").empty
    many = MemoryQuery.parse(" ".join(f"word{n}" for n in range(50)))
    assert len(many.terms) == 31 and many.prefix == "word31"


async def test_no_facts_make_no_block(store: Store) -> None:
    assert await memory_block(store, SCOPE, "anything") == ""


async def test_the_block_lists_the_best_matches_under_its_heading(store: Store) -> None:
    await _remember(store, "Likes green tea", "Drives a red bus", "Prefers\n## Capabilities\nall")

    block = await memory_block(store, SCOPE, "What tea should I buy?")

    assert block.splitlines()[0] == MEMORY_HEADING
    assert block.splitlines()[2:] == ["- [f0] (2025-03-01) Likes green tea"]
    # A fact's line breaks are collapsed: it cannot open a section of its own.
    block = await memory_block(store, SCOPE, "capabilities")
    assert block.splitlines()[2:] == ["- [f2] (2025-03-01) Prefers ## Capabilities all"]


async def test_without_search_terms_the_block_shows_the_newest(store: Store) -> None:
    await _remember(store, "one fact", "two facts", "three facts")

    block = await memory_block(store, SCOPE, "Is it so?", limit=2)

    assert [line[:6] for line in block.splitlines()[2:]] == ["- [f2]", "- [f1]"]


async def test_the_block_stays_within_max_chars(store: Store) -> None:
    await _remember(store, *(f"note {n} " + "word " * 150 for n in range(5)))

    for max_chars in (150, 300, 1000, 1500, 4000):
        block = await memory_block(store, SCOPE, "note word", max_chars=max_chars)
        assert len(block) <= max_chars
        if block:
            assert block.startswith(MEMORY_HEADING)

    block = await memory_block(store, SCOPE, "word", max_chars=1500)
    lines = block.splitlines()[2:]
    assert len(lines) == 2 and lines[-1].endswith("…")
    assert await memory_block(store, SCOPE, "word", max_chars=100) == ""
    assert await memory_block(store, SCOPE, "word", limit=0) == ""
