"""Proactive notifications: delivery receipts, the `notifications` fan-out, external triggers."""

from core.notifications.receipts import (
    ReceiptDesk,
    delivery_summary,
    notification_event,
    notification_line,
)

__all__ = ["ReceiptDesk", "delivery_summary", "notification_event", "notification_line"]
