"""`TurnWindow`: which messages one turn's model requests carry, and when to compact.

A turn's history starts after the session's latest summary marker. Each request sends the
summary (if any), then that history with old images dropped, tool calls paired with their
results, and the oldest turns left out until the estimate fits the budget: the model's
context window less room for its answer and a safety margin for the estimate's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from core.compaction import Compaction, Compactor, summary_messages
from core.context import Sanitizer, estimate_tokens, fit, strip_old_images
from core.messages import Message
from core.providers.base import Provider
from core.store.log import CompactionSummary, ConversationLog

__all__ = ["TurnWindow"]

# Share of the window kept free for the estimate's error.
_MARGIN_SHARE: Final = 20


class TurnWindow:
    """The request side of one turn: the summary in use, where the unsummarized history
    begins, and the budget its messages must fit."""

    def __init__(
        self,
        *,
        store: ConversationLog,
        session_id: str,
        window_tokens: int,
        max_tokens: int,
        fixed_tokens: int,
        summary: CompactionSummary | None,
        compactor: Compactor | None,
        ready: Sanitizer | None = None,
    ) -> None:
        """`fixed_tokens` estimates what every request carries besides messages (system
        prompt, turn context, tool definitions). `ready` is a previous turn's sanitizer of
        the same history, to go on from (it is checked, and replaced if it does not fit)."""
        self._store = store
        self._session_id = session_id
        self._compactor = compactor
        self.window_tokens = window_tokens
        self.summary = summary
        # Index into the turn's history of its first message after the summary's marker.
        self.start = 0
        output = min(max_tokens, window_tokens // 2)
        self.budget = window_tokens - output - window_tokens // _MARGIN_SHARE - fixed_tokens
        # Set after a context overflow the compactor could not relieve.
        self._cap: int | None = None
        self._sent = 0
        # The history after `start` made well-formed so far; each step adds only new messages.
        self.ready = ready or Sanitizer()
        self._ready_start = 0

    def _tail(self, history: Sequence[Message]) -> tuple[list[Message], int]:
        """The messages after the summary marker, well-formed, and their estimate."""
        ready = self.ready
        fed_to = self.start + ready.fed
        if (
            self._ready_start != self.start
            or len(history) < fed_to
            or (ready.fed and history[self.start] is not ready.first)
            or (ready.fed and history[fed_to - 1] is not ready.last)
        ):
            ready.clear()  # not the history fed so far: start over
            self._ready_start = self.start
            fed_to = self.start
        ready.feed(history[fed_to:])
        if not ready.has_images:
            return ready.result()
        # Which images are old depends on the whole tail; they are rare enough to redo it.
        again = Sanitizer()
        again.feed(strip_old_images(history[self.start :]))
        return again.result()

    def messages(self, history: Sequence[Message]) -> list[Message]:
        """The messages of the next request; raises `BudgetExceeded("context", ...)` when
        the latest turn alone does not fit."""
        head = summary_messages(self.summary) if self.summary else []
        budget = self.budget - sum(map(estimate_tokens, head))
        if self._cap is not None:
            budget = min(budget, self._cap)
        tail, whole = self._tail(history)
        if whole <= budget:
            # Everything fits (the usual case): no turn needs to be left out.
            self._sent = whole
            return head + tail
        fitted = fit(tail, budget_tokens=budget, estimate=estimate_tokens)
        self._sent = sum(map(estimate_tokens, fitted))
        return head + fitted

    def shrink(self) -> bool:
        """Halve what the messages may take (the provider counted more than estimated);
        False when nothing was sent that could be halved."""
        if self._sent <= 1:
            return False
        self._cap = self._sent // 2
        return True

    async def compact(
        self,
        history: Sequence[Message],
        *,
        force: bool = False,
        on: tuple[Provider, str] | None = None,
    ) -> Compaction | None:
        """Compact when the next request's estimate passes the trigger (always with `force`),
        summarizing with the provider and model `on` (default: the compactor's); None when
        there is no compactor or nothing to summarize."""
        if self._compactor is None:
            return None
        if not force:
            head = summary_messages(self.summary) if self.summary else []
            needed = sum(map(estimate_tokens, head)) + self._tail(history)[1]
            if not self._compactor.due(needed, self.budget):
                return None
        tail = history[self.start :]
        done = await self._compactor.compact(
            self._store,
            self._session_id,
            tail,
            previous=self.summary,
            window_tokens=self.window_tokens,
            on=on,
        )
        if done is None:
            return None
        self.summary = done.summary
        self.start += done.summarized_messages
        return done
