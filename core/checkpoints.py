"""`Checkpoint`: the durable trace of a user turn in flight, for recovery after a crash.

The handler saves one as `running` before the runtime starts a turn, bumps it after each tool
round and finishes it (`completed`) when the turn ends. A checkpoint still `running` when no
worker is on its turn is what a crash left behind: at start-up a worker resumes it (its inbound
goes back into the session's mailbox; the runtime carries on from the stored history) or
abandons it and tells the user, per the profile's `on_crash`; `switchboard recover` does the
same by hand.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.envelopes import Inbound

__all__ = ["ABANDONED_TEXT", "Checkpoint", "CheckpointStatus", "CrashPolicy"]

CheckpointStatus = Literal["running", "completed", "abandoned"]
CrashPolicy = Literal["resume", "abandon"]

ABANDONED_TEXT = (
    "Sorry — I was restarted while working on your message and could not finish it. "
    "Please send it again."
)


class Checkpoint(BaseModel):
    """Where a turn stands: keyed by its inbound's `dedupe_key`, the turn's identity."""

    model_config = ConfigDict(frozen=True)

    run_key: str
    session_id: str
    inbound: Inbound
    status: CheckpointStatus = "running"
    tool_rounds: int = 0
    # False while the rate limits' count of the message is not known to be made (the first
    # save goes with the count): a turn resumed from such a checkpoint is counted again.
    counted: bool = True
    started_at: datetime
    updated_at: datetime
