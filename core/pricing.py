"""What a provider call costs: list prices in USD per million tokens, and the `PriceBook`.

The figures in `PRICES` are the providers' published list prices per million tokens (no batch
or volume discounts). A profile adds or overrides them in its `[prices]` table, which the bot
passes to `PriceBook(extra=...)`; `core` itself reads no files.

A model with no price costs `None`, never 0: the ledger counts it as unpriced so a total is
never silently too low.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.messages import Usage

__all__ = ["PRICES", "Price", "PriceBook", "format_usd"]

log = logging.getLogger(__name__)

_PER_TOKENS: Final = 1_000_000


class Price(BaseModel):
    """USD per million tokens of each kind; `input` is for tokens that were not cached."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)


def _price(input: float, output: float, cache_read: float, cache_write: float) -> Price:
    return Price(input=input, output=output, cache_read=cache_read, cache_write=cache_write)


_CLAUDE_OPUS_4 = _price(15, 75, 1.50, 18.75)
_CLAUDE_SONNET_4 = _price(3, 15, 0.30, 3.75)
_CLAUDE_OPUS_45 = _price(5, 25, 0.50, 6.25)

# Keyed by the model name without its date suffix; `PriceBook` matches dated names by prefix.
# OpenAI caches automatically and charges nothing extra to write the cache.
PRICES: Final[Mapping[str, Price]] = MappingProxyType(
    {
        "claude-opus-4-6": _CLAUDE_OPUS_45,
        "claude-opus-4-5": _CLAUDE_OPUS_45,
        "claude-opus-4-1": _CLAUDE_OPUS_4,
        "claude-opus-4": _CLAUDE_OPUS_4,
        "claude-sonnet-4-6": _CLAUDE_SONNET_4,
        "claude-sonnet-4-5": _CLAUDE_SONNET_4,
        "claude-sonnet-4": _CLAUDE_SONNET_4,
        "claude-haiku-4-5": _price(1, 5, 0.10, 1.25),
        "claude-3-5-haiku": _price(0.80, 4, 0.08, 1.00),
        "gpt-5": _price(1.25, 10, 0.125, 0),
        "gpt-5-mini": _price(0.25, 2, 0.025, 0),
        "gpt-5-nano": _price(0.05, 0.40, 0.005, 0),
        "gpt-4.1": _price(2, 8, 0.50, 0),
        "gpt-4.1-mini": _price(0.40, 1.60, 0.10, 0),
        "gpt-4.1-nano": _price(0.10, 0.40, 0.025, 0),
        "gpt-4o": _price(2.50, 10, 1.25, 0),
        "gpt-4o-mini": _price(0.15, 0.60, 0.075, 0),
        "o4-mini": _price(1.10, 4.40, 0.275, 0),
        # The offline demo model: known to be free.
        "demo-1": _price(0, 0, 0, 0),
    }
)


class PriceBook:
    """Prices `PRICES` plus a profile's `extra` ones (which win), and costs calls with them."""

    def __init__(self, extra: Mapping[str, Price] = {}) -> None:
        """Use the built-in table, with `extra` adding models or replacing their prices."""
        self._prices: dict[str, Price] = {**PRICES, **extra}
        # Longest first, so "gpt-4o-mini-2024-07-18" finds "gpt-4o-mini" before "gpt-4o".
        self._keys_longest_first = sorted(self._prices, key=len, reverse=True)
        self._warned: set[str] = set()

    def price(self, model: str) -> Price | None:
        """The price of `model`, or `None` if the book has none.

        Tries, in order: the exact name; the name without a provider prefix ("openai/gpt-4o"
        as OpenRouter writes it); then the longest key that the name starts with followed by
        "-" (a dated or tagged release, "claude-sonnet-4-5-20250929").
        """
        names = [model]
        _, slash, bare = model.rpartition("/")
        if slash and bare:
            names.append(bare)
        for name in names:
            if (found := self._prices.get(name)) is not None:
                return found
        for name in names:
            for key in self._keys_longest_first:
                if name.startswith(f"{key}-"):
                    return self._prices[key]
        return None

    def cost(self, model: str, usage: Usage) -> float | None:
        """What `usage` of `model` costs in USD, or `None` when the model has no price.

        The first time a PriceBook meets an unpriced model it logs a warning.
        """
        price = self.price(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("no price for model %r; its calls are recorded as unpriced", model)
            return None
        return (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
        ) / _PER_TOKENS


def format_usd(amount: float) -> str:
    """Dollars with as many decimals as small amounts need: $2.50, $0.0123, $0.000031."""
    text = f"{amount:.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"
