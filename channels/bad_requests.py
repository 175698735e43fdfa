"""Logging refused webhook requests without letting a flood of them flood the log.

Anyone who finds a webhook's port can send it garbage. Each refused request is worth one
WARNING line (no traceback: nothing failed on our side), but only so many a minute: past that
they are counted, and the count is reported with the next line that is written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["BadRequestLog"]


class BadRequestLog:
    """At most `per_minute` WARNING lines a minute about refused requests; the rest counted."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        per_minute: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._per_minute = per_minute
        self._clock = clock
        self._window_start = float("-inf")
        self._written = 0
        self._unwritten = 0

    def refused(self, status: int, reason: str, remote: str | None) -> None:
        """Note that a request from `remote` was answered `status` because of `reason`."""
        now = self._clock()
        if now - self._window_start >= 60.0:
            self._window_start, self._written = now, 0
        if self._written >= self._per_minute:
            self._unwritten += 1
            return
        self._written += 1
        more = f" ({self._unwritten} more not logged)" if self._unwritten else ""
        self._unwritten = 0
        self._log.warning("refused a request from %s with %d: %s%s", remote, status, reason, more)
