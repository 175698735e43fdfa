"""`TurnAnswers`: the answer an `ask_user` question waits for, read from the turn's mailbox.

The turn that asks holds its session's mailbox claim, so the asker's next message waits there
behind the turn's head, put there by the one path every message takes. The tool looks for it
through the turn's `Arrivals` (`Arrivals.answer`: the first message of the asker, whatever it
says; a command or a button press is none), again every `ANSWER_POLL` seconds until its time
is up, and takes it as a joined message is taken (`core.turn_joins.take_answer`): marked
processed in the turn's fenced write, then out of the mailbox. Its text is the tool's result.
A turn without arrivals (no mailbox claim, as an outside run) has no `TurnAnswers`, and is not
offered the tool.
"""

from __future__ import annotations

import asyncio

from core.arrivals import Arrival
from core.outages import Patience
from core.store.turns import TurnRecords
from core.turn_joins import take_answer
from core.turn_state import TurnState

__all__ = ["ANSWER_POLL", "TurnAnswers", "answers_for"]

# Seconds between two looks at the mailbox for an answer (a bounded poll, as the sweep's).
ANSWER_POLL = 0.5


class TurnAnswers:
    """Where a turn's `ask_user` finds its answer: the turn's own mailbox."""

    def __init__(
        self, store: TurnRecords, patience: Patience, session_id: str, state: TurnState
    ) -> None:
        self._store = store
        self._patience = patience
        self._session_id = session_id
        self._state = state

    async def next_from(self, user_id: str, within: float) -> Arrival | None:
        """The first message `user_id` sends within `within` seconds, taken; None on silence."""
        arrivals = self._state.arrivals
        if arrivals is None:
            return None
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while True:
            arrival = await arrivals.answer(user_id)
            if arrival is not None:
                await take_answer(
                    self._store, self._patience, self._session_id, self._state, arrival
                )
                return arrival
            left = until - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(ANSWER_POLL, left))


def answers_for(
    store: TurnRecords, patience: Patience, session_id: str, state: TurnState
) -> TurnAnswers | None:
    """The turn's `TurnAnswers`; None when it has no arrivals (no mailbox to look in)."""
    if state.arrivals is None:
        return None
    return TurnAnswers(store, patience, session_id, state)
