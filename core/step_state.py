"""Live state the model is shown before each model call of a turn (an open browser page).

A `StepState` gives a short block for a session; the runtime adds it to the request's turn
context for that one call (`with_state`), so it is never stored in the conversation and is
always the state as it is now, not as it was some steps ago. The runtime also tells it when a
session's turn has ended (`turn_ended`), so what it holds for the turn (a browser context) is
let go. Decision record 0027.
"""

from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["StepState", "turn_ended", "with_state"]

log = logging.getLogger(__name__)


class StepState(Protocol):
    """Something live in a session that the model should see at every step."""

    def block(self, session_id: str) -> str:
        """The state to show before the session's next model call; "" for nothing."""
        ...

    async def turn_ended(self, session_id: str) -> None:
        """The session's turn is over: let go of what it held."""
        ...


def with_state(turn_context: str, state: StepState | None, session_id: str) -> str:
    """`turn_context` with the session's state block after it (when there is one)."""
    block = state.block(session_id) if state is not None else ""
    if not block:
        return turn_context
    return f"{turn_context}\n\n{block}" if turn_context else block


async def turn_ended(state: StepState | None, session_id: str) -> None:
    """Tell `state` the turn of `session_id` ended; its failure is logged, never raised (the
    turn's answer is given already)."""
    if state is None or not session_id:
        return
    try:
        await state.turn_ended(session_id)
    except Exception:
        log.warning("could not let go of the state of session %s", session_id, exc_info=True)
