"""Fencing tokens: how a store refuses the writes of a worker that lost a session.

The mailbox grants the right to run a session's turns (`core.mailbox.Claim`) and hands out, with
each grant, an epoch larger than any it granted for that session before. A fenced store write
carries the `Fence`; the store keeps, per session key, the highest epoch it has seen, and
atomically refuses a write with a lower one. So a worker that stalled past its claim, while
another worker claimed the session and wrote, cannot interleave its late writes: no store needs
to know how claims are kept (a Redis lease, a process-local set, anything else).

A refused write raises `FenceOvertaken`. It is not a failure of the turn to tell the user
about: the worker that got it no longer runs the session, so it stops the turn and sends
nothing (the next holder answers).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.errors import StoreError

__all__ = ["Fence", "FenceOvertaken"]


class Fence(BaseModel):
    """Proof of a claim on `session_key`: the claim's epoch, larger for every newer claim."""

    model_config = ConfigDict(frozen=True)

    session_key: str
    epoch: int = Field(ge=1)


class FenceOvertaken(StoreError):
    """A fenced write was refused: a newer claim on the session wrote since."""
