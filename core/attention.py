"""The attention pass: a cheap look at a person's messages before the model is asked.

No model call: urgency comes from markers ("urgent", "asap", "!!"), topics are the message's
keywords, and the focus is the keywords the person kept to across the recent messages of the
session. It is recomputed each turn from the history the turn already holds, so it needs no
state of its own and agrees across processes. The result is a short layer of the turn's context
(`Attention.layer`), beside the memory snippets (docs/memory.md, decision 0026).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from core.messages import Message

__all__ = [
    "ATTENTION_HEADING",
    "Attention",
    "AttentionSettings",
    "attend",
    "is_urgent",
    "keywords",
]

ATTENTION_HEADING: Final = "## Attention"

# Words of three letters or more (any script), no digits: ids, numbers and codes never count.
_WORD: Final = re.compile(r"[^\W\d_]{3,24}")
# Words that say nothing of what a message is about (English; other languages keep theirs).
_STOPWORDS: Final = frozenset(
    """
    about after again all also and any are because been before being but can cannot could did
    does doing done don for from get got had has have having her here hers him his how into its
    just let like made make many may more most much must need not now off once only other our
    out over own please same she should some such than thank thanks that the their them then
    there these they this those through too under until use used using very want was way were
    what when where which while who whom why will with would yes yet you your yours hello hey
    tell show give know think okay sure really thing things something anything one two
    """.split()
)
# Words and phrases that mark a message as urgent.
_URGENT_WORDS: Final = frozenset(
    {"urgent", "urgently", "asap", "emergency", "immediately", "critical"}
)
_URGENT_PHRASES: Final = ("right now", "right away", "as soon as possible", "!!")


class AttentionSettings(BaseModel):
    """The profile's `[attention]` table (docs/memory.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Give the model the attention layer (urgent / topics / focus) with each person's turn.
    enabled: bool = True
    # How many of the person's earlier messages (after the session's summary) the focus spans.
    focus_turns: int = Field(default=3, ge=1, le=20)


class Attention(BaseModel):
    """What the attention pass found in the newest message and the ones before it."""

    model_config = ConfigDict(frozen=True)

    urgent: bool = False
    # The newest message's keywords, most repeated first.
    topics: tuple[str, ...] = ()
    # Keywords of the newest message the person also used in their recent messages, and in how
    # many of those messages in a row (counting the newest).
    focus: tuple[str, ...] = ()
    focus_turns: int = 0

    def layer(self) -> str:
        """The prompt layer: a heading and one line each for what was found; "" for nothing."""
        lines: list[str] = []
        if self.urgent:
            lines.append("- urgent: the person marked this as urgent; answer it first, briefly.")
        if self.topics:
            lines.append(f"- topic: {', '.join(self.topics)}")
        if self.focus:
            lines.append(
                f"- focus: {', '.join(self.focus)} (the person's last {self.focus_turns} messages)"
            )
        return "\n".join([ATTENTION_HEADING, *lines]) if lines else ""


def keywords(text: str, *, limit: int = 8) -> list[str]:
    """The words `text` is about: lowercased, no stopwords, no digits, most repeated first
    (first seen first among equals), at most `limit`."""
    counts = Counter(word for word in _WORD.findall(text.lower()) if word not in _STOPWORDS)
    return [word for word, _ in counts.most_common(limit)]


def is_urgent(text: str) -> bool:
    """Whether `text` carries an urgency marker."""
    lowered = text.lower()
    if any(phrase in lowered for phrase in _URGENT_PHRASES):
        return True
    return any(word in _URGENT_WORDS for word in _WORD.findall(lowered))


def attend(history: Sequence[Message], settings: AttentionSettings | None = None) -> Attention:
    """The attention pass over the person's messages in `history` (oldest first): the newest
    one's urgency and topics, and the focus it shares with the ones before it."""
    settings = settings or AttentionSettings()
    asked = [m.text for m in history if m.role == "user"]
    if not asked:
        return Attention()
    newest = asked[-1]
    topics = [word for word in keywords(newest) if word not in _URGENT_WORDS][:3]
    focus: list[str] = []
    turns = 1
    kept = set(keywords(newest))
    for earlier in reversed(asked[-1 - settings.focus_turns : -1]):
        shared = kept & set(keywords(earlier))
        if not shared:
            break
        kept, turns = shared, turns + 1
    if turns > 1:
        focus = [word for word in keywords(newest) if word in kept][:3]
    return Attention(
        urgent=is_urgent(newest),
        topics=tuple(topics),
        focus=tuple(focus),
        focus_turns=turns if focus else 0,
    )
