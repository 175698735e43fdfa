"""Queue and topic names: the only place they are spelled."""

from __future__ import annotations

__all__ = ["CONTROL", "EVENTS", "NOTIFICATIONS", "RECEIPTS", "outbound_queue"]

# Inbound work has no queue here: it goes into its session's mailbox (`core/mailbox/`).
EVENTS = "events"
# Fan-out to every worker: cancels, `/stop` and confirmation answers for whichever worker
# runs the session (`core/mailbox/intake.py`).
CONTROL = "control"
# Work queue: gateways report what became of each proactive delivery (`Receipt`).
RECEIPTS = "receipts"
# Fan-out of every proactive delivery once its receipt is known (`notification.sent|failed`).
NOTIFICATIONS = "notifications"


def outbound_queue(platform: str) -> str:
    """The queue a platform's gateway consumes: `outbound.<platform>`."""
    return f"outbound.{platform}"
