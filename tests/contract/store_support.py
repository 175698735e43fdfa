"""What the store contract modules share: a fixed start time and a clock that ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["START", "TickingClock", "is_utc"]

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


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
