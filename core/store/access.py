"""Access records: pairing requests of people the bot does not know yet, and approvals.

A stranger's direct message under the `pairing` policy (`core/access.py`) files a
`PairingRequest` with a short code; an operator approves it (`switchboard pairing approve`, or
an admin's `/approve CODE` in a chat), which turns it into an `Approval` for that person on
that platform. Every worker reads approvals from here on every message, so an approval or a
revocation takes effect at once everywhere.

Requests expire (`expires_at`); an expired request is as good as gone and is dropped the next
time a request is filed on its platform. A denied request stays, `denied`, until it expires, so
the same person cannot ask again at once. A person has one live request at a time; a platform
has at most `max_pending` pending ones: a new request takes the place of the pending one that
expires first (the oldest), so strangers can crowd the operator's list but never close it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "PAIRING_ALPHABET",
    "AccessRecords",
    "Approval",
    "PairingAnswer",
    "PairingRequest",
]

# Upper-case letters and digits without the look-alikes 0/O and 1/I.
PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class PairingRequest(BaseModel):
    """A person who wrote to the bot and waits for an operator to let them in."""

    model_config = ConfigDict(frozen=True)

    platform: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    user_name: str = ""
    code: str = Field(pattern=f"^[{PAIRING_ALPHABET}]{{8}}$")
    status: Literal["pending", "denied"] = "pending"
    created_at: datetime
    expires_at: datetime


class Approval(BaseModel):
    """A person an operator let in on one platform; `admin` when approved as an admin."""

    model_config = ConfigDict(frozen=True)

    platform: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    user_name: str = ""
    admin: bool = False
    approved_at: datetime
    # Who approved: "cli", or "<platform>:<user id>" of the admin who answered /approve.
    approved_by: str = ""


class PairingAnswer(BaseModel):
    """What filing a request did.

    `created`: the request was stored (`request` is it; `gave_way`: the pending requests it
    took the place of, the list being full). `exists`: the person already has a live request,
    pending or denied (`request` is that one; nothing was stored). `code_taken`: another live
    request has this code (draw another).
    """

    model_config = ConfigDict(frozen=True)

    outcome: Literal["created", "exists", "code_taken"]
    request: PairingRequest | None = None
    gave_way: list[PairingRequest] = Field(default_factory=list)


class AccessRecords(Protocol):
    """Pairing requests and approvals; `now` says which requests are still live."""

    async def request_pairing(
        self, request: PairingRequest, *, now: datetime, max_pending: int
    ) -> PairingAnswer:
        """File `request` unless its person has a live one or its code is in use; drops
        expired requests first and, when the platform already has `max_pending` pending ones,
        the ones that expire first (`max_pending` is at least 1)."""
        ...

    async def pairing_requests(
        self, platform: str | None, *, now: datetime
    ) -> list[PairingRequest]:
        """The live pending requests of one platform (None: every platform), oldest first."""
        ...

    async def approve_pairing(
        self, platform: str, code: str, *, now: datetime, admin: bool, by: str
    ) -> Approval | None:
        """Turn the live pending request with `code` into an approval (replacing any earlier
        one of that person); None when there is no such request."""
        ...

    async def deny_pairing(
        self, platform: str, code: str, *, now: datetime
    ) -> PairingRequest | None:
        """Mark the live pending request with `code` denied (kept until it expires); the
        request as it was, or None when there is no such request."""
        ...

    async def approval(self, platform: str, user_id: str) -> Approval | None:
        """This person's approval on `platform`, or None."""
        ...

    async def approvals(self, platform: str | None) -> list[Approval]:
        """Every approval of one platform (None: every platform), by platform, oldest first."""
        ...

    async def revoke_approval(self, platform: str, user_id: str) -> bool:
        """Take this person's approval back; whether there was one."""
        ...
