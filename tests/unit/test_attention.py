"""The attention pass (`core/attention.py`): urgency from markers, topics from keywords, and a
focus carried across the person's recent messages; and its prompt layer."""

from __future__ import annotations

import pytest

from core.attention import ATTENTION_HEADING, Attention, AttentionSettings, attend, keywords
from core.messages import Message


def _asked(*texts: str) -> list[Message]:
    history: list[Message] = []
    for text in texts:
        history += [Message.user(text), Message.assistant("ok")]
    return history[:-1]


def test_keywords_leave_out_stopwords_digits_and_short_words() -> None:
    assert keywords("What is the weather in Paris on 12 June? Weather please!") == [
        "weather",
        "paris",
        "june",
    ]


def test_keywords_keep_letters_of_any_script() -> None:
    assert keywords("Quel temps fait-il à Zürich") == ["quel", "temps", "fait", "zürich"]


@pytest.mark.parametrize(
    "text",
    ["This is URGENT: the server is down", "need it asap", "call me right now", "help!!"],
)
def test_a_marker_makes_the_message_urgent(text: str) -> None:
    assert attend(_asked(text)).urgent


@pytest.mark.parametrize("text", ["how urgentish is this", "the emergent behaviour", "wow!"])
def test_no_marker_no_urgency(text: str) -> None:
    assert not attend(_asked(text)).urgent


def test_topics_are_the_newest_messages_keywords() -> None:
    found = attend(_asked("Tell me about cooking pasta", "Book a train ticket to Lyon"))

    assert found.topics == ("book", "train", "ticket")
    assert found.focus == ()


def test_the_focus_is_what_the_person_kept_to_across_messages() -> None:
    found = attend(
        _asked(
            "Train times to Lyon tomorrow?",
            "Is there a later train to Lyon",
            "And the train back from Lyon on Sunday",
        )
    )

    assert found.focus == ("train", "lyon")
    assert found.focus_turns == 3


def test_the_focus_stops_at_the_first_message_on_something_else() -> None:
    found = attend(
        _asked("Train times to Lyon", "Recipe for soup", "Soup with leeks", "Leek soup again")
    )

    assert found.focus == ("soup",)
    assert found.focus_turns == 3


def test_the_focus_spans_at_most_focus_turns_earlier_messages() -> None:
    history = _asked("lyon train", "lyon train", "lyon train", "lyon train")

    assert attend(history, AttentionSettings(focus_turns=1)).focus_turns == 2


def test_the_layer_names_what_was_found() -> None:
    layer = Attention(
        urgent=True, topics=("server", "down"), focus=("server",), focus_turns=2
    ).layer()

    assert layer.splitlines() == [
        ATTENTION_HEADING,
        "- urgent: the person marked this as urgent; answer it first, briefly.",
        "- topic: server, down",
        "- focus: server (the person's last 2 messages)",
    ]


def test_nothing_found_is_no_layer() -> None:
    assert attend(_asked("hi there")).layer() == ""
    assert attend([]).layer() == ""
