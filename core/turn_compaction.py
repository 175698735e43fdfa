"""`TurnCompaction`: a turn's compaction, and the consolidation into memory of what it
summarizes.

When the turn's window (`core/window.py`) is due (or a context overflow forces it), the
older messages are summarized; the messages the summary now stands in for are first offered
to the consolidator (`core/consolidation.py`), which keeps the durable facts they established.
The summarizing call runs on the turn's model when that is not the runtime's default (a chat's
`/model` choice, or the cheaper model of a degraded turn), else on the compactor's; it is
priced and charged to the ledger like the turn's own calls (its session, person and chat), and
counts toward the turn's cost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from core.consolidation import Consolidator
from core.events import AgentEvent, Compacted, Finished
from core.hooks import HookChain
from core.messages import Message
from core.redact import Redactor
from core.turn_spending import TurnSpending
from core.turn_state import ChannelContext, TurnState

__all__ = ["TurnCompaction"]

log = logging.getLogger(__name__)


class TurnCompaction:
    """Compacts a turn's history when due and consolidates what the summary covers."""

    def __init__(
        self,
        hooks: HookChain,
        redactor: Redactor,
        spending: TurnSpending,
        consolidator: Consolidator | None = None,
        *,
        model: str,
    ) -> None:
        """`spending` prices and charges the summarizing call; `model`: the runtime's default
        (a turn on another summarizes on its own)."""
        self.hooks = hooks
        self.redact = redactor
        self.spending = spending
        self.consolidator = consolidator
        self.model = model

    async def compact(
        self,
        session_id: str,
        history: Sequence[Message],
        context: ChannelContext,
        state: TurnState,
        emit: Callable[[AgentEvent | None], None],
        *,
        force: bool = False,
    ) -> bool:
        """Compact when due (always with `force`); whether it did. The messages the summary
        now stands in for are consolidated into memory before the next request is made."""
        start = state.view.start
        on = None if state.model == self.model else (state.provider, state.model)
        done = await state.view.compact(history, force=force, on=on)
        if done is None:
            return False
        if done.spent is not None:
            await self._charge(session_id, done.spent, state)
        summarized = history[start : start + done.summarized_messages]
        await self.consolidate(session_id, summarized, context, state)
        compacted = Compacted(
            summarized_messages=done.summarized_messages, summary_tokens=done.summary_tokens
        )
        emit(compacted)
        await self.hooks.on_compaction(compacted)
        return True

    async def _charge(self, session_id: str, spent: Finished, state: TurnState) -> None:
        """The summarizing call in the ledger, added to the turn's cost as its own calls are."""
        entry = self.spending.cost(session_id, state.run_id, spent, state)
        await self.spending.patience(lambda: self.spending.ledger.record_cost(entry))

    async def consolidate(
        self,
        session_id: str,
        messages: Sequence[Message],
        context: ChannelContext,
        state: TurnState,
    ) -> None:
        """Ask the consolidator about `messages` of a direct conversation with a person
        (a group's or a schedule's have no one person whose facts they are)."""
        if self.consolidator is None or context.scheduled or not context.is_direct:
            return
        if not context.user_id:
            return
        try:
            await self.consolidator.consolidate(
                session_id,
                messages,
                platform=context.platform,
                user_id=context.user_id,
                chat=state.chat,
            )
        except Exception as exc:
            # Memory is a side benefit of compaction: the turn goes on without it.
            log.warning("memory consolidation failed: %s", self.redact(str(exc)))
