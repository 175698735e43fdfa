"""Time as a parameter: everything that needs "now" takes a `Clock`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "english_date", "utc_now"]

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def english_date(moment: datetime, *, pad_day: bool = False) -> str:
    """ "Sunday 22 November 2026", whatever the machine's language settings are."""
    day = f"{moment.day:02d}" if pad_day else str(moment.day)
    return f"{_WEEKDAYS[moment.weekday()]} {day} {_MONTHS[moment.month - 1]} {moment.year}"
