"""Processed marks: which inbound messages (and scheduled firings) were already handled."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProcessedMarks"]


class ProcessedMarks(Protocol):
    """Idempotency markers: a redelivered message is answered once."""

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was."""
        ...

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before."""
        ...
