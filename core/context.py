"""The context window: how big a model's is, how much of it a history takes, what fits.

Token counts here are *estimates* made locally (no tokenizer is downloaded or called): about
four characters per token for alphabetic text, one per CJK character, a fixed cost per image
and per message. They lean high on purpose, and the runtime leaves a safety margin on top; a
provider that still reports `context_overflow` makes the runtime compact and retry once.

`fit` keeps the newest turns within a budget, `strip_old_images` drops image bytes from turns
the model has already seen, and `sanitize` repairs tool calls and results that lost their pair.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

from core.errors import BudgetExceeded
from core.messages import ImagePart, Message, TextPart, ToolCall
from core.providers.base import ToolSpec
from core.stored_images import IMAGE_TURNS, described

__all__ = [
    "CONTEXT_WINDOWS",
    "DEFAULT_CONTEXT_WINDOW",
    "IMAGE_TOKENS",
    "MISSING_RESULT",
    "Sanitizer",
    "context_window",
    "estimate_text",
    "estimate_tokens",
    "estimate_tools",
    "fit",
    "sanitize",
    "strip_old_images",
]

# Context windows in tokens, keyed like `core.pricing.PRICES`: a name matches its key exactly,
# or starts with the key followed by "-" or "." (a dated or tagged release).
CONTEXT_WINDOWS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "claude": 200_000,
        "gpt-4.1": 1_047_576,
        "gpt-4o": 128_000,
        "gpt-5": 400_000,
        "o4-mini": 200_000,
        "demo-1": 32_000,
    }
)
DEFAULT_CONTEXT_WINDOW: Final = 32_000

# What one image costs, whatever its size: about what both vendors charge for a large one.
IMAGE_TOKENS: Final = 1_600
# The framing of every message (role markers, separators), and of every tool call.
_MESSAGE_TOKENS: Final = 4
_TOOL_CALL_TOKENS: Final = 8
_CHARS_PER_TOKEN: Final = 4

# Han, kana, hangul and CJK punctuation: about one token per character.
_CJK: Final = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
# A run of whitespace usually folds into the token next to it.
_WHITESPACE: Final = re.compile(r"\s+")

MISSING_RESULT: Final = "(no result recorded)"
# How an image whose bytes are gone (erased, or never sent again) is described.
_GONE: Final = "no longer kept"

_KEYS_LONGEST_FIRST: Final = sorted(CONTEXT_WINDOWS, key=len, reverse=True)


def context_window(model: str) -> int:
    """The context window of `model` in tokens; `DEFAULT_CONTEXT_WINDOW` for unknown ones.

    Tries the exact name, then the name without a provider prefix ("openai/gpt-4o"), then the
    longest key the name starts with followed by "-" or ".".
    """
    names = [model]
    _, slash, bare = model.rpartition("/")
    if slash and bare:
        names.append(bare)
    for name in names:
        if (found := CONTEXT_WINDOWS.get(name)) is not None:
            return found
    for name in names:
        for key in _KEYS_LONGEST_FIRST:
            if name.startswith((f"{key}-", f"{key}.")):
                return CONTEXT_WINDOWS[key]
    return DEFAULT_CONTEXT_WINDOW


def estimate_text(text: str) -> int:
    """An estimate of the tokens of `text`: never less than the length / 4, rounded up."""
    if not text:
        return 0
    if len(text) >= _REMEMBERED_LENGTH:
        return _estimate_long(text)
    return _estimate(text)


# A system prompt is built again for every turn, the same text most of the time: the estimates
# of long texts are kept (hashing a text is far cheaper than measuring it again).
_REMEMBERED_LENGTH: Final = 512


@functools.lru_cache(maxsize=64)
def _estimate_long(text: str) -> int:
    return _estimate(text)


def _estimate(text: str) -> int:
    folded = _WHITESPACE.sub(" ", text)
    cjk = len(_CJK.findall(folded))
    return math.ceil((len(folded) - cjk) / _CHARS_PER_TOKEN) + cjk


def estimate_tokens(message: Message) -> int:
    """An estimate of what `message` takes of the context window (measured once per message)."""
    return message.derived("tokens", _measure)


def _measure(message: Message) -> int:
    tokens = _MESSAGE_TOKENS
    for part in message.content:
        if isinstance(part, TextPart):
            tokens += estimate_text(part.text)
        else:
            tokens += IMAGE_TOKENS
    for call in message.tool_calls:
        arguments = call.raw_arguments
        if arguments is None:
            arguments = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
        tokens += _TOOL_CALL_TOKENS + estimate_text(call.name) + estimate_text(arguments)
    if message.tool_call_id is not None:
        tokens += estimate_text(message.tool_call_id) + estimate_text(message.name or "")
    return tokens


def estimate_tools(tools: Sequence[ToolSpec]) -> int:
    """An estimate of what the tool definitions offered to the model take."""
    return sum(t.derived("tokens", _tool_tokens) for t in tools)


def _tool_tokens(spec: ToolSpec) -> int:
    return (
        _TOOL_CALL_TOKENS
        + estimate_text(spec.name)
        + estimate_text(spec.description)
        + estimate_text(json.dumps(spec.parameters, separators=(",", ":")))
    )


def fit(
    history: Sequence[Message],
    *,
    budget_tokens: int,
    estimate: Callable[[Message], int] = estimate_tokens,
) -> list[Message]:
    """The newest messages of `history` whose estimate fits `budget_tokens`.

    Cuts only before a user message, so a turn is kept or left out whole; the turn of the
    latest user message is always kept, and when it alone is over the budget this raises
    `BudgetExceeded("context", ...)`. A history without a user message is kept whole if it
    fits.
    """
    used = 0
    start: int | None = None
    for index in range(len(history) - 1, -1, -1):
        used += estimate(history[index])
        if used > budget_tokens:
            break
        if history[index].role == "user" or index == 0:
            start = index
    if start is None:
        newest_user = next(
            (i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), 0
        )
        needed = sum(estimate(m) for m in history[newest_user:])
        raise BudgetExceeded(
            "context",
            f"the latest turn needs about {needed} tokens; the context budget is {budget_tokens}",
        )
    return list(history[start:])


def strip_old_images(
    messages: Sequence[Message], keep_last_turns: int = IMAGE_TURNS
) -> list[Message]:
    """`messages` with each image of all but the last `keep_last_turns` turns replaced by a
    short line saying what it was (a turn begins at a user message), as is an image whose
    bytes are no longer kept. Messages without images stay the same objects."""
    kept: list[Message] = list(messages)
    if not any(m.derived("has_images", _has_images) for m in kept):
        return kept
    turns = 0
    for index in range(len(kept) - 1, -1, -1):
        message = kept[index]
        old = turns >= keep_last_turns
        if any(isinstance(p, ImagePart) and (old or not p.data) for p in message.content):
            content = [
                TextPart(text=described(p) if old else described(p, _GONE))
                if isinstance(p, ImagePart) and (old or not p.data)
                else p
                for p in message.content
            ]
            kept[index] = message.model_copy(update={"content": content})
        if message.role == "user":
            turns += 1
    return kept


def _has_images(message: Message) -> bool:
    return any(isinstance(p, ImagePart) for p in message.content)


def sanitize(messages: Sequence[Message]) -> list[Message]:
    """`messages` made well-formed for a provider: every assistant tool call followed by its
    result (an error result `MISSING_RESULT` is added where none was stored), and no tool
    result without a call of the assistant message it follows."""
    repairs = Sanitizer()
    repairs.feed(messages)
    return repairs.result()[0]


class Sanitizer:
    """`sanitize` for a history that grows: feed it the new messages as they come and read
    the result, without going over the older ones again. Keeps a running token estimate."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget everything fed so far."""
        self.fed = 0
        self.has_images = False
        self.first: Message | None = None
        self.last: Message | None = None
        self._kept: list[Message] = []
        self._tokens = 0
        # The calls of the latest assistant message that still wait for their results.
        self._waiting: dict[str, ToolCall] = {}

    def feed(self, messages: Iterable[Message]) -> None:
        """Take the next messages of the history, oldest first."""
        for message in messages:
            if not self.fed:
                self.first = message
            self.fed += 1
            self.last = message
            if message.derived("has_images", _has_images):
                self.has_images = True
            if message.role == "tool":
                if self._waiting.pop(message.tool_call_id or "", None) is not None:
                    self._keep(message)
                continue
            for closing in self._closing():
                self._keep(closing)
            self._waiting.clear()
            self._keep(message)
            if message.role == "assistant" and message.tool_calls:
                self._waiting = {c.id: c for c in message.tool_calls}

    def result(self) -> tuple[list[Message], int]:
        """The well-formed messages so far and their estimate (calls still waiting get an
        error result here, and their real one if it is fed later)."""
        closing = self._closing()
        return self._kept + closing, self._tokens + sum(map(estimate_tokens, closing))

    def _keep(self, message: Message) -> None:
        self._kept.append(message)
        self._tokens += estimate_tokens(message)

    def _closing(self) -> list[Message]:
        """Error results for the calls still waiting, in the order they were made."""
        return [
            Message.tool_result(call, MISSING_RESULT, is_error=True)
            for call in self._waiting.values()
        ]
