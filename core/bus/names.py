"""Queue and topic names: the only place they are spelled."""

from __future__ import annotations

__all__ = ["CONTROL", "EVENTS", "INBOUND", "outbound_queue"]

INBOUND = "inbound"
EVENTS = "events"
# Fan-out to every worker: cancel requests for whichever worker runs the session.
CONTROL = "control"


def outbound_queue(platform: str) -> str:
    """The queue a platform's gateway consumes: `outbound.<platform>`."""
    return f"outbound.{platform}"
