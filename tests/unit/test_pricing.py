"""`PriceBook`: finding a model's price by name, and what a call's usage costs."""

from __future__ import annotations

import logging

import pytest

from core.messages import Usage
from core.pricing import PRICES, Price, PriceBook

MILLION = 1_000_000


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("demo-1", "demo-1"),
        # Dated and tagged releases.
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("o4-mini-2025-04-16", "o4-mini"),
        # Provider prefixes, as OpenRouter writes them.
        ("openai/gpt-4o", "gpt-4o"),
        ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
        ("openai/gpt-5-nano-2025-08-07", "gpt-5-nano"),
    ],
)
def test_price_finds_exact_dated_and_prefixed_names(model: str, key: str) -> None:
    assert PriceBook().price(model) == PRICES[key]


@pytest.mark.parametrize(
    ("model", "key", "shorter"),
    [
        ("gpt-4o-mini", "gpt-4o-mini", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "gpt-4o"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini", "gpt-5"),
        ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano", "gpt-4.1"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5", "claude-opus-4"),
    ],
)
def test_longest_matching_key_wins(model: str, key: str, shorter: str) -> None:
    # The shorter key also matches and has a different price, so the test can tell them apart.
    assert PRICES[shorter] != PRICES[key]

    assert PriceBook().price(model) == PRICES[key]


@pytest.mark.parametrize(
    "model",
    [
        "mystery-9000",
        "gpt-4",  # a key's prefix is not the key
        "gpt-4oo",  # a key followed by something other than "-"
        "claude-sonnet",
        "anthropic/",
        "",
    ],
)
def test_unknown_model_has_no_price(model: str) -> None:
    assert PriceBook().price(model) is None


def test_unknown_model_costs_none_and_is_logged_once_per_book(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = PriceBook()
    usage = Usage(input_tokens=1000, output_tokens=1000)

    with caplog.at_level(logging.WARNING, logger="core.pricing"):
        assert book.cost("mystery-9000", usage) is None
        assert book.cost("mystery-9000", usage) is None
        assert book.cost("other-mystery", usage) is None
        assert book.cost("gpt-4o", usage) is not None
        assert PriceBook().cost("mystery-9000", usage) is None

    warned = [r for r in caplog.records if r.name == "core.pricing"]
    assert [r.levelno for r in warned] == [logging.WARNING] * 3
    # Messages, not args: a process's scrubbing filter may already have formatted the record.
    named = [
        next(m for m in ("mystery-9000", "other-mystery") if m in r.getMessage()) for r in warned
    ]
    assert named == ["mystery-9000", "other-mystery", "mystery-9000"]


def test_free_model_costs_zero_not_none() -> None:
    assert PriceBook().cost("demo-1", Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0


def test_cost_adds_all_four_token_kinds() -> None:
    usage = Usage(
        input_tokens=2_000, output_tokens=500, cache_read_tokens=10_000, cache_write_tokens=4_000
    )

    cost = PriceBook().cost("claude-sonnet-4-5-20250929", usage)

    # 2000 * 3 + 500 * 15 + 10000 * 0.30 + 4000 * 3.75 = 6000 + 7500 + 3000 + 15000
    assert cost == pytest.approx(31_500 / MILLION)


@pytest.mark.parametrize(
    ("field", "per_million"),
    [
        ("input_tokens", 2.50),
        ("output_tokens", 10.0),
        ("cache_read_tokens", 1.25),
        ("cache_write_tokens", 0.0),
    ],
)
def test_each_token_kind_is_charged_at_its_own_rate(field: str, per_million: float) -> None:
    usage = Usage.model_validate({field: MILLION})

    assert PriceBook().cost("gpt-4o", usage) == pytest.approx(per_million)


def test_empty_usage_costs_zero() -> None:
    assert PriceBook().cost("claude-opus-4-5", Usage()) == 0.0


def test_extra_prices_add_models_and_override_the_table() -> None:
    house = Price(input=1, output=2, cache_read=0.5, cache_write=0)
    discounted = Price(input=1, output=5, cache_read=0.1, cache_write=1)
    book = PriceBook(extra={"house-model": house, "claude-sonnet-4-5": discounted})
    usage = Usage(input_tokens=MILLION, output_tokens=MILLION)

    assert book.price("house-model") == house
    assert book.price("house-model-v2") == house
    assert book.price("claude-sonnet-4-5-20250929") == discounted
    assert book.cost("anthropic/claude-sonnet-4-5", usage) == pytest.approx(6.0)
    # Untouched entries keep their list price, and other books are unaffected.
    assert book.price("claude-sonnet-4") == PRICES["claude-sonnet-4"]
    assert PriceBook().price("claude-sonnet-4-5") == PRICES["claude-sonnet-4-5"]
    assert PriceBook().price("house-model") is None


def test_extra_prefixed_key_matches_before_the_bare_name() -> None:
    routed = Price(input=9, output=9, cache_read=9, cache_write=9)
    book = PriceBook(extra={"openrouter/gpt-4o": routed})

    assert book.price("openrouter/gpt-4o") == routed
    assert book.price("openai/gpt-4o") == PRICES["gpt-4o"]


def test_price_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        PRICES["gpt-4o"] = Price(input=0, output=0, cache_read=0, cache_write=0)  # type: ignore[index]


def test_price_rejects_negative_and_unknown_fields() -> None:
    with pytest.raises(ValueError, match="greater than or equal"):
        Price(input=-1, output=0, cache_read=0, cache_write=0)
    with pytest.raises(ValueError, match="extra"):
        Price.model_validate(
            {"input": 1, "output": 1, "cache_read": 0, "cache_write": 0, "cahce": 1}
        )
