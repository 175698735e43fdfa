"""Joining the messages that came while a turn ran (`core/arrivals.py`) to that turn."""

from __future__ import annotations

import functools
from collections.abc import Callable

from core.budgets import spender_keys
from core.events import AgentEvent, Joined
from core.messages import Message
from core.outages import Patience
from core.store.turns import TurnClose, TurnRecords
from core.turn_state import TurnState
from core.voice import transcription_costs

__all__ = ["join_arrivals"]


async def join_arrivals(
    store: TurnRecords,
    patience: Patience,
    session_id: str,
    state: TurnState,
    emit: Callable[[AgentEvent | None], None],
    step: int,
) -> list[Message]:
    """The messages that came meanwhile, joined to the turn before its model call `step`:
    each stored, its transcribed recordings charged (to its sender) and marked processed in
    one write, then taken out of its mailbox."""
    arrivals = state.arrivals
    if arrivals is None:
        return []
    stored: list[Message] = []
    for arrival in await arrivals.joining(step):
        inbound = arrival.inbound
        user, chat = spender_keys(
            inbound.address.platform, inbound.user_id, inbound.address, scheduled=False
        )
        closing = TurnClose(
            session_id=session_id,
            messages=[arrival.message],
            costs=transcription_costs(
                inbound, session_id=session_id, run_id=state.run_id, user=user, chat=chat
            ),
            finished=inbound.dedupe_key,
        )
        stored += await patience(functools.partial(store.close_turn, closing, fence=state.fence))
        emit(Joined(inbound_id=arrival.inbound.id, text=arrival.message.text))
        await arrivals.joined(arrival)
    return stored
