"""`core.context`: token estimates, window sizes, fitting, image stripping, sanitizing."""

from __future__ import annotations

import pytest

from core.context import (
    DEFAULT_CONTEXT_WINDOW,
    IMAGE_TOKENS,
    MISSING_RESULT,
    context_window,
    estimate_text,
    estimate_tokens,
    fit,
    sanitize,
    strip_old_images,
)
from core.errors import BudgetExceeded
from core.messages import ImagePart, Message, TextPart, ToolCall

PNG = ImagePart(media_type="image/png", data=b"\x89PNG" + b"\0" * 4_000)


def call(call_id: str, name: str = "lookup") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"q": call_id})


def turn(n: int, words: int = 10) -> list[Message]:
    return [Message.user(f"question {n} " + "word " * words), Message.assistant(f"answer {n}")]


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


# --- estimates -----------------------------------------------------------------------------


def test_text_estimates_are_about_four_characters_a_token() -> None:
    assert estimate_text("") == 0
    assert estimate_text("abcd") == 1
    assert estimate_text("a" * 400) == 100
    english = "The quick brown fox jumps over the lazy dog. " * 20
    assert len(english) / 5 <= estimate_text(english) <= len(english) / 3


def test_text_estimates_grow_with_the_text() -> None:
    sizes = [estimate_text("word " * n) for n in range(0, 200, 7)]
    assert sizes == sorted(sizes)
    assert sizes[-1] > sizes[1] > 0


def test_whitespace_runs_count_once_and_cjk_counts_per_character() -> None:
    assert estimate_text("a" + " " * 400 + "b") == estimate_text("a b")
    assert estimate_text("日本語のテキスト") == 8
    assert estimate_text("日本語 abcd") >= 4


def test_message_estimates_count_images_and_tool_calls() -> None:
    plain = estimate_tokens(Message.user("look"))
    with_image = estimate_tokens(Message.user("look", [PNG]))
    asking = estimate_tokens(Message.assistant("", [call("c1"), call("c2")]))
    bigger = ToolCall(id="c3", name="lookup", arguments={"q": "x" * 400})

    assert plain > 0
    assert with_image == plain + IMAGE_TOKENS
    assert asking > estimate_tokens(Message.assistant("", [call("c1")]))
    assert estimate_tokens(Message.assistant("", [bigger])) >= 100


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-opus-4-1", 200_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-4o-mini", 128_000),
        ("openai/gpt-4o", 128_000),
        ("gpt-5", 400_000),
        ("gpt-5.1", 400_000),
        ("gpt-5-nano", 400_000),
        ("o4-mini", 200_000),
        ("demo-1", 32_000),
        ("someone-elses-model", DEFAULT_CONTEXT_WINDOW),
        ("claudette", DEFAULT_CONTEXT_WINDOW),
    ],
)
def test_context_windows_are_found_by_prefix(model: str, window: int) -> None:
    assert context_window(model) == window


# --- fit -----------------------------------------------------------------------------------


def test_fit_keeps_everything_that_fits() -> None:
    history = [*turn(1), *turn(2), Message.user("now")]

    assert fit(history, budget_tokens=10_000) == history


def test_fit_keeps_the_newest_turns_and_cuts_before_a_user_message() -> None:
    history = [m for n in range(1, 11) for m in turn(n)] + [Message.user("latest")]
    # Room for the last three turns and the answer of the fourth, but not its question.
    budget = sum(estimate_tokens(m) for m in history[-8:])

    kept = fit(history, budget_tokens=budget)

    assert kept == history[-7:]
    assert kept[0].text.startswith("question 8")
    assert kept[-1].text == "latest"


def test_fit_never_splits_a_turn_with_tool_calls() -> None:
    history = [
        Message.user("old question"),
        Message.assistant("", [call("c1")]),
        Message.tool_result(call("c1"), "r" * 800),
        Message.assistant("old answer"),
        Message.user("new question"),
        Message.assistant("", [call("c2")]),
        Message.tool_result(call("c2"), "short"),
    ]
    budget = sum(estimate_tokens(m) for m in history[1:])

    kept = fit(history, budget_tokens=budget)

    assert texts(kept)[0] == "new question"
    assert len(kept) == 3


def test_fit_refuses_when_the_latest_turn_alone_is_too_big() -> None:
    history = [*turn(1), Message.user("x" * 4_000)]

    with pytest.raises(BudgetExceeded) as raised:
        fit(history, budget_tokens=100)

    assert raised.value.budget == "context"
    assert "100" in str(raised.value)


def test_fit_uses_the_given_estimate() -> None:
    history = [*turn(1), *turn(2)]

    kept = fit(history, budget_tokens=2, estimate=lambda _m: 1)

    assert kept == history[2:]


# --- images --------------------------------------------------------------------------------


def test_images_are_dropped_from_older_turns_only() -> None:
    history = [
        Message.user("first", [PNG]),
        Message.assistant("a pixel"),
        Message.user("second", [PNG]),
        Message.assistant("another"),
        Message.user("third", [PNG]),
    ]

    stripped = strip_old_images(history)

    assert [len(m.images) for m in stripped] == [0, 0, 0, 0, 1]
    assert stripped[0].text.startswith("first")
    assert any("image" in p.text for p in stripped[0].content if isinstance(p, TextPart))
    assert stripped[0].seq == history[0].seq
    assert stripped[1] is history[1]
    assert stripped[4] is history[4]
    assert [len(m.images) for m in strip_old_images(history, keep_last_turns=2)] == [
        0,
        0,
        1,
        0,
        1,
    ]
    assert len(history[0].images) == 1


# --- sanitize ------------------------------------------------------------------------------


def test_a_well_formed_history_is_unchanged() -> None:
    history = [
        Message.user("hi"),
        Message.assistant("", [call("c1"), call("c2")]),
        Message.tool_result(call("c1"), "one"),
        Message.tool_result(call("c2"), "two"),
        Message.assistant("done"),
    ]

    assert sanitize(history) == history


def test_orphan_tool_results_are_dropped() -> None:
    history = [
        Message.tool_result(call("gone"), "its call was summarized away"),
        Message.user("hi"),
        Message.assistant("", [call("c1")]),
        Message.tool_result(call("c1"), "one"),
        Message.tool_result(call("c1"), "a duplicate"),
        Message.tool_result(call("c9"), "never asked"),
        Message.assistant("done"),
    ]

    cleaned = sanitize(history)

    assert texts(cleaned) == ["hi", "", "one", "done"]


def test_calls_without_results_get_an_error_result_in_order() -> None:
    history = [
        Message.user("hi"),
        Message.assistant("", [call("c1"), call("c2"), call("c3")]),
        Message.tool_result(call("c2"), "two"),
        Message.user("are you there?"),
        Message.assistant("", [call("c4")]),
    ]

    cleaned = sanitize(history)

    assert [(m.role, m.tool_call_id, m.text) for m in cleaned] == [
        ("user", None, "hi"),
        ("assistant", None, ""),
        ("tool", "c2", "two"),
        ("tool", "c1", MISSING_RESULT),
        ("tool", "c3", MISSING_RESULT),
        ("user", None, "are you there?"),
        ("assistant", None, ""),
        ("tool", "c4", MISSING_RESULT),
    ]
    assert all(m.is_error for m in cleaned if m.text == MISSING_RESULT)
