"""The fusion of keyword and similarity rankings (`core.hybrid_facts`), the vector helpers of
`core.embeddings`, and the fake's made-up vectors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.embeddings import Embedding, cosine_similarity, pack_vector, unpack_vector
from core.facts import MemoryFact
from core.hybrid_facts import RRF_K, reciprocal_rank_fusion, similarity_ranking
from tests.fakes.embeddings_api import fake_vector

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _fact(fact_id: str) -> MemoryFact:
    return MemoryFact(id=fact_id, scope="default:telegram:1", text=fact_id, created_at=NOW)


def test_a_fact_both_rankings_hold_beats_one_only_one_ranking_holds() -> None:
    fused = reciprocal_rank_fusion(["a", "b", "c"], ["c", "d"])

    # c: 1/(60+3) + 1/(60+1); a: 1/61; d: 1/62; b: 1/62, first seen before d.
    assert fused == ["c", "a", "b", "d"]


def test_the_fused_score_is_the_sum_of_reciprocal_ranks() -> None:
    # x is 2nd in both: 2/62 = 0.03226 beats y, 1st in one and 30th in the other:
    # 1/61 + 1/90 = 0.02750.
    keyword = ["y", "x", *[f"k{i}" for i in range(27)], "z"]
    semantic = ["w", "x", *[f"s{i}" for i in range(27)], "y"]

    fused = reciprocal_rank_fusion(keyword, semantic)

    assert fused[0] == "x"
    assert fused.index("x") < fused.index("y") < fused.index("w")
    assert RRF_K == 60


def test_fusion_with_one_ranking_keeps_it_and_ignores_repeats() -> None:
    assert reciprocal_rank_fusion(["a", "b", "a", "c"]) == ["a", "b", "c"]
    assert reciprocal_rank_fusion([], []) == []
    with pytest.raises(ValueError, match="k must be at least 1"):
        reciprocal_rank_fusion(["a"], k=0)


def test_similarity_ranking_orders_by_cosine_and_drops_the_dissimilar() -> None:
    question = (1.0, 0.0, 0.0)
    facts = [
        (_fact("far"), Embedding("m", (0.0, 1.0, 0.0))),
        (_fact("near"), Embedding("m", (0.9, 0.1, 0.0))),
        (_fact("same"), Embedding("m", (2.0, 0.0, 0.0))),
        (_fact("other-model"), Embedding("m", (1.0, 0.0))),
    ]

    ranked = similarity_ranking(question, facts, min_similarity=0.5)

    assert [f.id for f in ranked] == ["same", "near"]
    assert [f.id for f in similarity_ranking(question, facts, min_similarity=0.5, limit=1)] == [
        "same"
    ]


def test_cosine_similarity_of_zero_and_mismatched_vectors_is_zero() -> None:
    assert cosine_similarity((1.0, 2.0), (2.0, 4.0)) == pytest.approx(1.0)
    assert cosine_similarity((1.0, 0.0), (-1.0, 0.0)) == pytest.approx(-1.0)
    assert cosine_similarity((0.0, 0.0), (1.0, 0.0)) == 0.0
    assert cosine_similarity((1.0, 0.0), (1.0, 0.0, 0.0)) == 0.0


def test_a_vector_packs_to_float32_bytes_and_back() -> None:
    packed = pack_vector([0.5, -1.25, 3.0])

    assert len(packed) == 12
    assert unpack_vector(packed) == (0.5, -1.25, 3.0)
    with pytest.raises(ValueError, match="no float32 vector"):
        unpack_vector(b"abc")


def test_the_fakes_vectors_meet_on_shared_words_and_listed_synonyms_only() -> None:
    dog = fake_vector("Has a dog called Rex")
    puppy = fake_vector("What is my puppy's name?")
    tea = fake_vector("Likes green tea")

    assert fake_vector("Has a dog called Rex") == dog  # deterministic
    assert cosine_similarity(dog, puppy) > 0.3
    assert cosine_similarity(dog, tea) < 0.3
    assert fake_vector("the and of") == [0.0] * 256
