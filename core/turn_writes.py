"""`TurnWrites`: what a turn writes to the store through its `Patience`.

Each step's messages go in one fenced write with the cost of its model call and the
checkpoint moved on; a turn that ends early gives its tool calls left without a result one.
"""

from __future__ import annotations

import logging
from typing import Protocol

from core.clock import Clock
from core.envelopes import new_id
from core.errors import Unavailable
from core.fencing import FenceOvertaken
from core.messages import Message
from core.outages import Patience
from core.store.ledger import CostEntry
from core.store.log import ConversationLog
from core.store.turns import TurnClose, TurnRecords
from core.turn_state import TurnState

__all__ = ["TurnWrites", "WritesStore"]

log = logging.getLogger(__name__)


class WritesStore(ConversationLog, TurnRecords, Protocol):
    """What a turn's writes need: its messages, read back, and its fenced closing writes."""


class TurnWrites:
    """The fenced writes of one runtime's turns, outages of the store waited out."""

    def __init__(self, store: WritesStore, patience: Patience, clock: Clock) -> None:
        self.store = store
        self.patience = patience
        self.clock = clock

    async def persist(
        self,
        session_id: str,
        state: TurnState,
        messages: list[Message],
        cost: CostEntry | None = None,
        rounds: int | None = None,
    ) -> list[Message]:
        """Store a step's `messages` with the `cost` of its model call, and the checkpoint
        moved on to `rounds` tool rounds done: one write. The messages as stored."""
        checkpoint = state.checkpoint
        if checkpoint is not None and rounds is not None:
            checkpoint = checkpoint.model_copy(
                update={
                    "tool_rounds": max(rounds, checkpoint.tool_rounds),
                    "updated_at": self.clock(),
                }
            )
        closing = TurnClose(
            session_id=session_id,
            # One id for every attempt: a write that landed though its answer was lost is not
            # made twice.
            messages=[m if m.id else m.model_copy(update={"id": new_id()}) for m in messages],
            costs=[] if cost is None else [cost],
            checkpoint=checkpoint if rounds is not None else None,
        )
        stored = await self.patience(lambda: self.store.close_turn(closing, fence=state.fence))
        if rounds is not None:
            state.checkpoint = checkpoint
        return stored

    async def close_pending(self, session_id: str, state: TurnState, reason: str) -> None:
        """Give every tool call of this turn left without a result one.

        Reads back what the store holds rather than trusting in-memory bookkeeping: a write
        cancelled mid-flight may or may not have committed.
        """
        if state.first_seq == 0:
            return
        try:
            written = await self.patience(
                lambda: self.store.list_messages(session_id, after_seq=state.first_seq - 1),
                read=True,
            )
            answered = {m.tool_call_id for m in written if m.role == "tool"}
            closed = [
                Message.tool_result(call, reason, is_error=True)
                for message in written
                for call in message.tool_calls
                if call.id not in answered
            ]
            if closed:
                await self.persist(session_id, state, closed)
        except (Unavailable, FenceOvertaken) as exc:
            log.warning("could not close the tool calls of an interrupted turn: %s", exc)
        except Exception:
            log.exception("could not close the tool calls of an interrupted turn")
