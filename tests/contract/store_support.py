"""What the store contract modules share: a fixed start time, a clock that ticks, and the type
of the `open_store` fixture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from core.store import Store

__all__ = ["START", "OpenStore", "TickingClock", "is_utc"]

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

# The `open_store` fixture: opens the implementation's store again, with the clock given.
OpenStore = Callable[[Callable[[], datetime]], Awaitable[Store]]


class TickingClock:
    """A clock that moves one second forward on every reading, so order never rests on luck."""

    def __init__(self, start: datetime = START) -> None:
        self._next = start

    def __call__(self) -> datetime:
        now = self._next
        self._next += timedelta(seconds=1)
        return now


def is_utc(moment: datetime | None) -> bool:
    """Whether `moment` is an aware time at UTC offset zero."""
    return moment is not None and moment.utcoffset() == timedelta(0)
