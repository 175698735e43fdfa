"""Mailboxes: one ordered queue of waiting work per session, drained by one worker at a time.

Whoever accepts an `Inbound` (a gateway, the scheduler, the hooks listener, the web page) puts
it in its session's mailbox (`core/mailbox/intake.py`), which wakes a worker. Whoever holds the
session's `Claim` runs its turns in order: `head()`, handle it, `done()`. A claim is a lease: a
worker that dies lets it lapse, and another worker finds the mailbox still full (`pending()`)
and carries on, so work put in a mailbox is never lost. A wake may be lost (a worker that took
it died): the same sweep finds the session (docs/decisions/0009-one-queue-per-session.md).

Each claim carries a `Fence` (`core/fencing.py`) with an epoch that grows with every claim on
the session; a store refuses a write fenced with an older epoch than one it saw, so a worker
that stalled past its lease cannot write after the next holder did. Epochs are counters
floored by the clock (microseconds since 1970), so they keep growing even when the mailboxes'
own state is lost (a process restart, a Redis emptied) while the store remembers old epochs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from core.confirm import parse_answer
from core.envelopes import Inbound
from core.fencing import Fence

__all__ = ["BEHIND_LIMIT", "Claim", "ClaimState", "LocalWakes", "Mailboxes", "is_plain"]

# How many waiting items `Claim.behind` reads at most.
BEHIND_LIMIT = 20


def is_plain(inbound: Inbound) -> bool:
    """Whether `inbound` is a plain person's message: what may join the turn running ahead of
    it (`core/turns/steering.py`). Not a command (`/stop`...), a button press, a cancel, a
    typed yes or no (a confirmation's answer), a schedule's or an outside request's run."""
    return (
        inbound.origin == "user"
        and inbound.kind == "message"
        and parse_answer(inbound.text) is None
    )


class Claim(Protocol):
    """The exclusive right to run one session's turns, while it is renewed."""

    @property
    def session_key(self) -> str:
        """The session whose mailbox this claim drains."""
        ...

    @property
    def fence(self) -> Fence:
        """Proof of the claim for fenced store writes: its epoch is larger than that of every
        earlier claim on the session, so a store refuses the writes of a claim overtaken."""
        ...

    @property
    def lost(self) -> asyncio.Event:
        """Set when the claim could not be renewed: stop the turn, its writes are refused."""
        ...

    async def head(self) -> Inbound | None:
        """The oldest waiting work of the session, or None when the mailbox is empty."""
        ...

    async def done(self, inbound: Inbound) -> None:
        """Remove `inbound` once it has been handled: the head, or a message that joined the
        head's turn (`behind`)."""
        ...

    async def behind(
        self, limit: int = BEHIND_LIMIT, *, accept: Callable[[Inbound], bool] = is_plain
    ) -> list[Inbound]:
        """The plain person's messages (`is_plain`, or what `accept` takes: the answer of an
        `ask_user` question may be a typed yes) waiting right behind the head, oldest first,
        up to the first item that is not one (it keeps its place), `limit` at most. Nothing
        is removed: each is taken out with `done` once it joined the turn."""
        ...

    async def release(self) -> bool:
        """Give the claim up; True when work arrived that nobody drains yet."""
        ...

    @property
    def released(self) -> bool:
        """True once `done` found the mailbox empty and gave the claim up with it: the drain
        reads the mailbox no more (its `release` sends nothing)."""
        ...


class Mailboxes(Protocol):
    """Per-session mailboxes with claims."""

    async def put(self, inbound: Inbound) -> None:
        """Add work to its session's mailbox, in arrival order, and wake a worker for it.

        Putting the same envelope twice (a producer's retry) keeps one copy."""
        ...

    async def woken(self, within: float) -> str | None:
        """The session of the next wake (work was put for it), or None after `within`
        seconds. Each wake goes to one worker."""
        ...

    async def waiting(self) -> int:
        """How many items wait in all the mailboxes (their turns running or not yet begun)."""
        ...

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The claim on a session, or None while another worker holds it."""
        ...

    async def pending(self) -> list[str]:
        """Session keys whose mailboxes hold work and whose sessions nobody holds (a holder
        reads its mailbox again at its next `done` or `release`), sorted."""
        ...


class LocalWakes:
    """Wakes within one process (the embedded deployment): sessions work was put for, in order.

    Work another process puts in a shared file wakes nobody here; the worker's sweep finds it."""

    def __init__(self) -> None:
        self._sessions: asyncio.Queue[str] = asyncio.Queue()

    def wake(self, session_key: str) -> None:
        """Tell a waiting worker that `session_key` has work."""
        self._sessions.put_nowait(session_key)

    async def next(self, within: float) -> str | None:
        """The next woken session, or None after `within` seconds."""
        try:
            async with asyncio.timeout(within):
                return await self._sessions.get()
        except TimeoutError:
            return None


class ClaimState:
    """What every implementation's claim holds: its session, the fence of its epoch, and the
    event set when it is lost. Implementations subclass it and add `head`, `behind`, `done`,
    `release`."""

    def __init__(self, session_key: str, epoch: int) -> None:
        self._key = session_key
        self._fence = Fence(session_key=session_key, epoch=epoch)
        self._lost = asyncio.Event()
        self._released = False

    @property
    def session_key(self) -> str:
        """The session whose mailbox this claim drains."""
        return self._key

    @property
    def fence(self) -> Fence:
        """Proof of the claim for store writes."""
        return self._fence

    @property
    def lost(self) -> asyncio.Event:
        """Set when the claim could not be kept: stop the turn, its writes are refused."""
        return self._lost

    @property
    def released(self) -> bool:
        """Whether `done` gave the claim up already (the mailbox was empty)."""
        return self._released
