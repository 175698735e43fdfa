"""Joining the messages that came while a turn ran (`core/arrivals.py`) to that turn."""

from __future__ import annotations

import functools
from collections.abc import Callable

from core.arrivals import Arrival
from core.events import AgentEvent, Joined
from core.messages import Message
from core.outages import Patience
from core.store.turns import TurnClose, TurnRecords
from core.turn_state import TurnState

__all__ = ["join_arrivals", "take_answer"]


async def join_arrivals(
    store: TurnRecords,
    patience: Patience,
    session_id: str,
    state: TurnState,
    emit: Callable[[AgentEvent | None], None],
    step: int,
) -> list[Message]:
    """The messages that came meanwhile, joined to the turn before its model call `step`:
    each stored and marked processed in one write, then taken out of its mailbox."""
    arrivals = state.arrivals
    if arrivals is None:
        return []
    stored: list[Message] = []
    for arrival in await arrivals.joining(step):
        closing = TurnClose(
            session_id=session_id,
            messages=[arrival.message],
            finished=arrival.inbound.dedupe_key,
        )
        stored += await patience(functools.partial(store.close_turn, closing, fence=state.fence))
        emit(Joined(inbound_id=arrival.inbound.id, text=arrival.message.text))
        await arrivals.joined(arrival)
    return stored


async def take_answer(
    store: TurnRecords, patience: Patience, session_id: str, state: TurnState, arrival: Arrival
) -> None:
    """Take `arrival`, the answer of an `ask_user` question (core/turn_answers.py), as a
    joined message is taken, but with nothing stored: its text becomes the tool's result,
    stored with the tool round. Marked processed in one fenced write, then taken out of its
    mailbox: a crash between the two leaves a marked copy there, skipped when reached."""
    arrivals = state.arrivals
    if arrivals is None:
        return
    closing = TurnClose(session_id=session_id, finished=arrival.inbound.dedupe_key)
    await patience(functools.partial(store.close_turn, closing, fence=state.fence))
    await arrivals.joined(arrival)
