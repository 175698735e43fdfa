"""`python -m bench memory`: its labelled set holds together and recall at k is counted right."""

from __future__ import annotations

import json

from bench.memory import SET, recall_at


def test_the_labelled_set_answers_each_question_with_facts_it_holds() -> None:
    labelled = json.loads(SET.read_text())
    facts, questions = labelled["facts"], labelled["questions"]

    assert 30 <= len(facts) <= 50 and len(questions) >= 20
    for question in questions:
        assert question["answers"], question
        assert set(question["answers"]) <= set(facts), question


def test_recall_at_k_is_the_share_of_the_answers_in_the_first_k() -> None:
    assert recall_at(["a", "b", "c", "d", "e", "f"], ["f"]) == 0.0
    assert recall_at(["x", "a"], ["a", "b"]) == 0.5
    assert recall_at(["b", "a"], ["a", "b"], k=1) == 0.5
    assert recall_at([], ["a"]) == 0.0
