"""Compaction: older turns of a long conversation summarized so the rest fits the window.

`Compactor.compact` summarizes every message before the last `keep_last` (cut before a user
message, so no turn is split) with one provider call, folding in the previous summary, and
stores the result as a `CompactionSummary` whose `up_to_seq` marks what it stands in for.
Later requests send `summary_messages(summary)` and the messages after the marker; the full
history stays in the store. When the summarizing call fails, the first characters of each
older message stand in for a summary, so a turn never fails for want of one.

The summarizing call runs on the compactor's model unless the caller names another (`on`: the
turn's model, a chat's `/model` choice); what it spent comes back in `Compaction.spent` for
the caller to charge to the session's ledger (`core/turn_compaction.py`,
`core/session_compaction.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from core.clock import utc_now
from core.context import estimate_text
from core.events import Finished
from core.messages import Message
from core.providers.base import ModelRequest, Provider, complete
from core.store.log import CompactionSummary, ConversationLog

__all__ = ["Compaction", "CompactionSummary", "Compactor", "summary_messages"]

log = logging.getLogger(__name__)

_SUMMARY_SYSTEM: Final = (
    "You condense conversations. Write a faithful summary of the conversation below for the "
    "assistant who will continue it: the user's goals, facts and preferences they stated, "
    "decisions made, results of tool calls that still matter, and open questions. Keep names, "
    "numbers and dates exact. Write plain prose or short bullet points; no preamble."
)
_SUMMARY_HEADER: Final = "Summary of the earlier conversation (the full messages are archived):"
_SUMMARY_ACK: Final = "Noted; I will continue from that summary."
# What one message may take of the text sent to be summarized, before shrinking to fit.
_MAX_MESSAGE_CHARS: Final = 2_000
_MIN_MESSAGE_CHARS: Final = 40
# Instructions and framing of the summarizing request, in estimated tokens.
_REQUEST_OVERHEAD: Final = 200


@dataclass(frozen=True)
class Compaction:
    """What one compaction did: the stored summary and how many messages it newly covers."""

    summary: CompactionSummary
    summarized_messages: int
    summary_tokens: int
    # False when the provider call failed and snippets of the messages stand in.
    by_model: bool
    # The summarizing call's usage, provider and model, to be charged; None: no call answered.
    spent: Finished | None = None


def summary_messages(summary: CompactionSummary) -> list[Message]:
    """The messages that carry a summary at the head of a request: a user/assistant pair, so
    the conversation after it still starts with a user message and roles keep alternating."""
    return [
        Message.user(f"{_SUMMARY_HEADER}\n\n{summary.text}"),
        Message.assistant(_SUMMARY_ACK),
    ]


class Compactor:
    """Decides when a conversation needs compacting and does it with one provider call."""

    def __init__(
        self,
        provider: Provider,
        model: str,
        *,
        keep_last: int = 8,
        trigger_ratio: float = 0.8,
        summary_max_tokens: int = 1024,
        snippet_chars: int = 160,
        timeout: float = 120.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """Summarize with `model` on `provider`; compact when a request's estimate passes
        `trigger_ratio` of the budget, keeping at least the last `keep_last` messages."""
        if not 0 < trigger_ratio <= 1:
            raise ValueError(f"trigger_ratio must be in (0, 1], got {trigger_ratio}")
        if keep_last < 1 or summary_max_tokens < 1 or snippet_chars < 1:
            raise ValueError("keep_last, summary_max_tokens and snippet_chars must be positive")
        self.provider = provider
        self.model = model
        self.keep_last = keep_last
        self.trigger_ratio = trigger_ratio
        self.summary_max_tokens = summary_max_tokens
        self.snippet_chars = snippet_chars
        self.timeout = timeout
        self._clock = clock

    def due(self, estimate_tokens: int, budget_tokens: int) -> bool:
        """Whether a request estimated at `estimate_tokens` calls for compacting first."""
        return estimate_tokens > self.trigger_ratio * budget_tokens

    def split(self, messages: Sequence[Message]) -> int:
        """How many leading `messages` to summarize: those before the last `keep_last`, cut
        before a user message (so more may be kept); 0 when nothing can go."""
        for index in range(min(len(messages) - self.keep_last, len(messages) - 1), 0, -1):
            if messages[index].role == "user":
                return index
        return 0

    async def compact(
        self,
        store: ConversationLog,
        session_id: str,
        messages: Sequence[Message],
        *,
        previous: CompactionSummary | None,
        window_tokens: int,
        on: tuple[Provider, str] | None = None,
    ) -> Compaction | None:
        """Summarize the leading part of `messages` (the stored ones after `previous`'s
        marker) together with `previous`, with the provider and model `on` (default: the
        compactor's), and store the summary; None if nothing can go."""
        cut = self.split(messages)
        if cut == 0:
            return None
        older = messages[:cut]
        text, by_model, spent = await self.summarize(
            previous.text if previous else "", older, window_tokens=window_tokens, on=on
        )
        summary = CompactionSummary(up_to_seq=older[-1].seq, text=text, created_at=self._clock())
        await store.save_summary(session_id, summary)
        return Compaction(
            summary=summary,
            summarized_messages=cut,
            summary_tokens=estimate_text(text),
            by_model=by_model,
            spent=spent,
        )

    async def summarize(
        self,
        previous: str,
        older: Sequence[Message],
        *,
        window_tokens: int,
        on: tuple[Provider, str] | None = None,
    ) -> tuple[str, bool, Finished | None]:
        """A summary of `previous` and `older`, whether the model wrote it (else it is made
        of snippets), and what the call spent (None: it did not answer)."""
        provider, model = on or (self.provider, self.model)
        room = window_tokens - self.summary_max_tokens - window_tokens // 20 - _REQUEST_OVERHEAD
        request = ModelRequest.model_construct(
            model=model,
            system=_SUMMARY_SYSTEM,
            turn_context="",
            messages=[Message.user(_prompt(previous, older, max(room, 0)))],
            tools=[],
            max_tokens=self.summary_max_tokens,
            temperature=None,
        )
        try:
            async with asyncio.timeout(self.timeout):
                completion = await complete(provider, request)
        except Exception as exc:
            log.warning("summarizing older turns failed (%s); keeping snippets instead", exc)
            return self.snippets(previous, older), False, None
        spent = Finished(usage=completion.usage, provider=provider.name, model=model)
        if text := completion.text.strip():
            return text, True, spent
        log.warning("the summary came back empty; keeping snippets instead")
        return self.snippets(previous, older), False, spent

    def snippets(self, previous: str, older: Sequence[Message]) -> str:
        """The first characters of each message (and of `previous`), the newest kept when
        they do not all fit `summary_max_tokens`."""
        lines = [f"(earlier) {_clip(previous, self.snippet_chars * 4)}"] if previous else []
        lines.extend(f"{_speaker(m)}: {_clip(_render(m), self.snippet_chars)}" for m in older)
        kept: list[str] = []
        used = 0
        for line in reversed(lines):
            used += estimate_text(line) + 1
            if used > self.summary_max_tokens:
                break
            kept.append(line)
        return "\n".join(reversed(kept))


def _prompt(previous: str, older: Sequence[Message], max_tokens: int) -> str:
    """The text to summarize, each message shortened as far as needed to fit `max_tokens`."""
    head = f"The summary so far:\n{previous}\n\n" if previous else ""
    cap = _MAX_MESSAGE_CHARS
    while True:
        transcript = "\n".join(f"{_speaker(m)}: {_clip(_render(m), cap)}" for m in older)
        text = f"{head}The conversation to summarize:\n{transcript}"
        if estimate_text(text) <= max_tokens or cap <= _MIN_MESSAGE_CHARS:
            break
        cap //= 2
    # A character is never estimated at more than one token: this cut always fits.
    if estimate_text(text) <= max_tokens:
        return text
    return text[len(text) - max_tokens :] if max_tokens > 0 else ""


def _speaker(message: Message) -> str:
    if message.role == "tool":
        return f"Tool {message.name or 'result'}"
    return message.role.capitalize()


def _render(message: Message) -> str:
    parts = [message.text]
    parts.extend("[image]" for _ in message.images)
    parts.extend(f"[called {c.name} {c.raw_arguments or c.arguments}]" for c in message.tool_calls)
    return " ".join(p for p in parts if p)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
