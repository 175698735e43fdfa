"""Queue and topic names: the only place they are spelled."""

from __future__ import annotations

__all__ = ["EVENTS", "INBOUND", "outbound_queue"]

INBOUND = "inbound"
EVENTS = "events"


def outbound_queue(platform: str) -> str:
    """The queue a platform's gateway consumes: `outbound.<platform>`."""
    return f"outbound.{platform}"
