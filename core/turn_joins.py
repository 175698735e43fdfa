"""Joining the messages that came while a turn ran (`core/arrivals.py`) to that turn."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol

from core.arrivals import Arrival
from core.budgets import spender_keys
from core.events import AgentEvent, Joined
from core.messages import Message
from core.outages import Patience
from core.store.images import StoredImages
from core.store.turns import TurnClose, TurnRecords
from core.stored_images import with_image_bytes
from core.turn_state import TurnState
from core.voice import transcription_costs

__all__ = ["JoinStore", "join_arrivals", "take_answer"]


class JoinStore(TurnRecords, StoredImages, Protocol):
    """What joining needs: the turn's writes, and the images of what it stored."""


async def join_arrivals(
    store: JoinStore,
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
        written = await patience(functools.partial(store.close_turn, closing, fence=state.fence))
        # The store gives back images as references; this turn sends them whole.
        stored += await patience(
            functools.partial(with_image_bytes, store, session_id, written), read=True
        )
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
