"""Takeovers: an operator answers a conversation in the bot's place for a while.

A takeover is kept per chat address (`<platform>:<chat>[:<thread>]`, as people type it; the
bot's own key, part of a session key, is not in it, so the CLI can name a chat without
knowing it). While a takeover is active (not ended, before its `until`), a worker stores a
person's message in the conversation and answers nothing (`keep_message`); what the operator
sends is stored as theirs (`keep_operator_message`). A takeover ends by a handback or, past its
`until`, by `end_expired`, which returns each one it ended once, for the notice to the admins.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from core.envelopes import Address
from core.fencing import Fence
from core.messages import Message

__all__ = ["Takeover", "TakeoverRecords", "chat_of"]


def chat_of(address: Address) -> str:
    """The chat a takeover is kept under: the address as people type it, without the bot."""
    return str(address)


class Takeover(BaseModel):
    """One chat taken over by an operator."""

    model_config = ConfigDict(frozen=True)

    # `chat_of(address)`: `telegram:123`, `slack:C0123:1700000000.1`.
    chat: str
    # Who took it over: `cli`, `web`, or `<platform>:<user id>` of an admin.
    by: str
    since: datetime
    until: datetime
    # When it ended (handed back or expired); None while it runs.
    ended_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        """Whether the bot leaves the chat alone at `now`."""
        return self.ended_at is None and now < self.until


class TakeoverRecords(Protocol):
    """Takeovers and the conversation writes made while one runs; one transaction per call."""

    async def take_over(self, takeover: Takeover) -> Takeover:
        """Start `takeover` (`ended_at` None); a running one of the chat is replaced, keeping
        its `since`. Returns the takeover as kept."""
        ...

    async def takeover_of(self, chat: str) -> Takeover | None:
        """The chat's newest takeover, running or ended, or None."""
        ...

    async def running_takeovers(self, now: datetime) -> list[Takeover]:
        """Takeovers not ended and not past their `until` at `now`, oldest first."""
        ...

    async def hand_back(self, chat: str, now: datetime) -> Takeover | None:
        """End the chat's running takeover at `now`; the ended one, or None if none ran."""
        ...

    async def end_expired(self, now: datetime) -> list[Takeover]:
        """End every takeover past its `until` and not ended yet; each ended one (ended at its
        `until`), so a caller tells of each exactly once."""
        ...

    async def keep_message(
        self,
        session_key: str,
        session_id: str,
        message: Message,
        *,
        finished: str,
        fence: Fence | None = None,
    ) -> Message:
        """Store a person's `message` in the key's current session (made under `session_id`
        if it has none) and mark `finished` processed, together; stored once per `finished`.
        Raises `FenceOvertaken` as `TurnRecords.open_turn` does."""
        ...

    async def keep_operator_message(
        self, address: Address, message: Message, *, session_id: str | None
    ) -> Message | None:
        """Store `message` in the current session of the chat `address` names (of whichever
        bot's key); when the chat has none, one is made under `address.session_key` and
        `session_id`, or with `session_id` None nothing is stored (None)."""
        ...
