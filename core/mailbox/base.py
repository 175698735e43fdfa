"""Mailboxes: one ordered queue of waiting work per session, drained by one worker at a time.

A worker takes an `Inbound` off the bus, puts it in its session's mailbox (durably, in the
distributed deployment) and acks the bus. Whoever holds the session's `Claim` runs its turns
in order: `head()`, handle it, `done()`. A claim is a lease: a worker that dies lets it lapse,
and another worker finds the mailbox still full (`pending()`) and carries on, so work handed
to a mailbox is never lost.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from core.envelopes import Inbound
from core.store.base import Fence

__all__ = ["Claim", "Mailboxes"]


class Claim(Protocol):
    """The exclusive right to run one session's turns, while it is renewed."""

    @property
    def session_key(self) -> str:
        """The session whose mailbox this claim drains."""
        ...

    @property
    def fence(self) -> Fence | None:
        """Proof of the claim for store writes; None where one process owns everything."""
        ...

    @property
    def lost(self) -> asyncio.Event:
        """Set when the claim could not be renewed: stop the turn, its writes are refused."""
        ...

    async def head(self) -> Inbound | None:
        """The oldest waiting work of the session, or None when the mailbox is empty."""
        ...

    async def done(self, inbound: Inbound) -> None:
        """Remove `inbound` (the head) once it has been handled."""
        ...

    async def release(self) -> bool:
        """Give the claim up; True when work arrived that nobody drains yet."""
        ...


class Mailboxes(Protocol):
    """Per-session mailboxes with claims."""

    async def put(self, inbound: Inbound) -> None:
        """Add work to its session's mailbox, in arrival order."""
        ...

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The claim on a session, or None while another worker holds it."""
        ...

    async def pending(self) -> list[str]:
        """Session keys whose mailboxes hold work."""
        ...
