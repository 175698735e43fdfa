"""`TurnCompaction`: a turn's compaction, and the consolidation into memory of what it
summarizes.

When the turn's window (`core/window.py`) is due (or a context overflow forces it), the
older messages are summarized; the messages the summary now stands in for are first offered
to the consolidator (`core/consolidation.py`), which keeps the durable facts they established.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from core.consolidation import Consolidator
from core.events import AgentEvent
from core.hooks import HookChain
from core.messages import Message
from core.redact import Redactor
from core.turn_state import ChannelContext, TurnState

__all__ = ["TurnCompaction"]

log = logging.getLogger(__name__)


class TurnCompaction:
    """Compacts a turn's history when due and consolidates what the summary covers."""

    def __init__(
        self, hooks: HookChain, redactor: Redactor, consolidator: Consolidator | None = None
    ) -> None:
        self.hooks = hooks
        self.redact = redactor
        self.consolidator = consolidator

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
        compacted = await state.view.compact(history, force=force)
        if compacted is None:
            return False
        summarized = history[start : start + compacted.summarized_messages]
        await self.consolidate(session_id, summarized, context, state)
        emit(compacted)
        await self.hooks.on_compaction(compacted)
        return True

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
