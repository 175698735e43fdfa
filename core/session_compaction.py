"""Compaction on request: `/compact` summarizes a chat's older messages now, whatever its size.

The same `Compactor` as a turn's automatic compaction (`core/compaction.py`) writes the
summary, and the messages it now stands in for are consolidated into the person's memory as
there (`core/consolidation.py`, a direct chat with a person only). Commands run between the
session's turns (they wait in its mailbox like any message), so no turn's view of the history
is changed under it. An extension's `request_compaction()` compacts within the turn instead,
through the turn's own window (`core/turn_compaction.py`, forced).

The summarizing call runs on the chat's `/model` choice when it made one (else on the
compactor's model) and is charged to the session's ledger under the person who asked and the
chat, so budgets and `/cost` count it as they count a turn's calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from core.budgets import spender_keys
from core.compaction import Compactor
from core.consolidation import Consolidator
from core.envelopes import Inbound, new_id
from core.events import Finished
from core.messages import Message
from core.model_choice import ModelChoices
from core.redact import Redactor
from core.store.ledger import CostEntry
from core.store.log import ConversationLog
from core.turn_spending import TurnSpending

__all__ = ["CompactionReport", "SessionCompaction"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction on request did: the messages requests carried before and after
    (the summary's two counted as messages), and whether the model wrote the summary."""

    before: int
    after: int
    summarized: int
    by_model: bool = True

    def sentence(self) -> str:
        """The reply to `/compact`."""
        if self.summarized == 0:
            return (
                f"Nothing to compact: this conversation's {self.before} recent messages are "
                "kept as they are."
            )
        how = "" if self.by_model else " (the model could not summarize; snippets stand in)"
        return (
            f"Compacted this conversation: {self.summarized} older messages summarized{how}; "
            f"the model now reads {self.after} messages instead of {self.before}."
        )


class SessionCompaction:
    """Compacts the current session of a chat on request, through the runtime's compactor."""

    def __init__(
        self,
        store: ConversationLog,
        compactor: Compactor,
        *,
        window_tokens: int,
        spending: TurnSpending,
        models: ModelChoices | None = None,
        consolidator: Consolidator | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """`spending` prices and charges the summarizing call (the runtime's); `models` finds
        the chat's chosen model."""
        self.store = store
        self.compactor = compactor
        self.spending = spending
        self.models = models
        self.window_tokens = window_tokens
        self.consolidator = consolidator
        self._redact = redactor or Redactor()

    async def compact(self, inbound: Inbound) -> CompactionReport:
        """Summarize the older messages of `inbound`'s chat's current session now."""
        session = await self.store.current_session(inbound.session_key)
        previous = await self.store.latest_summary(session.id)
        after = previous.up_to_seq if previous is not None else 0
        messages = await self.store.list_messages(session.id, after_seq=after)
        # The summary travels as a user/assistant pair (`summary_messages`).
        head = 2 if previous is not None else 0
        before = head + len(messages)
        models, chosen = self.models, session.model
        done = await self.compactor.compact(
            self.store,
            session.id,
            messages,
            previous=previous,
            window_tokens=self.window_tokens,
            on=models.pick(chosen) if models is not None and chosen is not None else None,
        )
        if done is None:
            return CompactionReport(before=before, after=before, summarized=0)
        if done.spent is not None:
            await self._charge(session.id, inbound, done.spent)
        log.info(
            "compacted %d messages of session %s on request", done.summarized_messages, session.id
        )
        await self._consolidate(session.id, inbound, messages[: done.summarized_messages])
        return CompactionReport(
            before=before,
            after=2 + len(messages) - done.summarized_messages,
            summarized=done.summarized_messages,
            by_model=done.by_model,
        )

    async def _charge(self, session_id: str, inbound: Inbound, spent: Finished) -> None:
        """The summarizing call in the ledger: the session's, the asking person's, the chat's."""
        spending = self.spending
        user, chat = spender_keys(
            inbound.address.platform, inbound.user_id, inbound.address, scheduled=False
        )
        entry = CostEntry(
            session_id=session_id,
            run_id=f"compact-{new_id()}",
            provider=spent.provider,
            model=spent.model,
            usage=spent.usage,
            cost_usd=spending.cost_of(spent.model, spent.usage) if spending.cost_of else None,
            at=spending.clock(),
            user=user,
            chat=chat,
            id=new_id(),
        )
        await spending.patience(lambda: spending.ledger.record_cost(entry))

    async def _consolidate(
        self, session_id: str, inbound: Inbound, messages: Sequence[Message]
    ) -> None:
        """As automatic compaction does: a direct chat's person's facts are kept first."""
        if self.consolidator is None or not inbound.is_direct or not inbound.user_id:
            return
        platform = inbound.address.platform
        _, chat = spender_keys(platform, inbound.user_id, inbound.address, scheduled=False)
        try:
            await self.consolidator.consolidate(
                session_id, messages, platform=platform, user_id=inbound.user_id, chat=chat
            )
        except Exception as exc:
            log.warning("memory consolidation failed: %s", self._redact(str(exc)))
