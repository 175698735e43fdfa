"""`Arrivals`: the person's messages that come while a turn runs and join it.

The runtime asks its `Arrivals` before each model call (`AgentRuntime.run(arrivals=)`): each
message it is given is stored in the turn's history and marked processed in one fenced write,
announced (`Joined`), and only then handed back (`joined`) to be taken out of the session's
mailbox. A crash between the two leaves the message in the mailbox with its processed mark,
so its redelivery is skipped: nothing lost, nothing answered twice
(docs/decisions/0012-messages-while-busy.md). `core/turns/steering.py` implements it on the
session's claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from core.envelopes import Inbound
from core.messages import Message

__all__ = ["Arrival", "Arrivals", "BusyMode"]

# What a person's message that comes while a turn runs in its chat does (the profile's `busy`):
# joins the running turn before its next model call ("steer"); waits with the turn's first
# message for a short window, then all are answered in one turn ("collect"); or waits for a
# turn of its own ("queue").
BusyMode = Literal["steer", "collect", "queue"]


@dataclass(frozen=True)
class Arrival:
    """One message joining the running turn: the envelope it came in and the user message
    it becomes (with its id, so a write tried again stores it once)."""

    inbound: Inbound
    message: Message


class Arrivals(Protocol):
    """Where a running turn finds the messages that join it."""

    async def joining(self, step: int) -> list[Arrival]:
        """The messages to join the turn before its model call number `step` (1: the first),
        oldest first; none when nothing waits."""
        ...

    async def answer(self, user_id: str) -> Arrival | None:
        """The first message `user_id` typed behind the turn's head, whatever it says (a yes
        too), whatever `busy` says: the answer an `ask_user` question waits for
        (core/turn_answers.py); None while there is none. Taken out with `joined` too."""
        ...

    async def joined(self, arrival: Arrival) -> None:
        """`arrival` is stored and marked processed: take it out of where it waited."""
        ...
