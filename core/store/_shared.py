"""What both stores do alike: time as text and as scores, naive times refused, limits checked,
schedules matched to deliveries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import BaseModel

from core.envelopes import Address
from core.errors import StoreError
from core.scheduling.models import Schedule

__all__ = [
    "check_aware",
    "check_limit",
    "delivers_to",
    "epoch_micros",
    "from_utc_text",
    "utc_text",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def check_aware(record: BaseModel, what: str) -> None:
    """Raise `StoreError` if any datetime in `record` (nested models included) is naive.

    A naive time has no instant: stored, it would sort and fire at a guess.
    """
    for path, value in _datetimes(record, ""):
        if value.utcoffset() is None:
            raise StoreError(f"{what}'s `{path}` is a naive datetime; it must be aware")


def delivers_to(schedule: Schedule, address: Address) -> bool:
    """Whether `schedule` delivers to `address`'s platform, chat and thread.

    The bot is left out: a delivery goes through whichever bot serves the platform.
    """
    target = schedule.deliver_to
    return (target.platform, target.chat, target.thread) == (
        address.platform,
        address.chat,
        address.thread,
    )


def utc_text(moment: datetime) -> str:
    """Fixed-width UTC text (always microseconds, always +00:00): text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_utc_text(text: str) -> datetime:
    """The aware UTC datetime of a stored time text."""
    return datetime.fromisoformat(text).astimezone(UTC)


def check_limit(limit: int) -> None:
    """Refuse a negative `limit` for a listing."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")


def epoch_micros(moment: datetime) -> int:
    """Epoch microseconds: exact as a sorted-set score (a double) until the year 2255."""
    return (moment - _EPOCH) // _MICROSECOND


def _datetimes(record: BaseModel, prefix: str) -> list[tuple[str, datetime]]:
    found: list[tuple[str, datetime]] = []
    for name, value in record:
        path = f"{prefix}{name}"
        if isinstance(value, datetime):
            found.append((path, value))
        elif isinstance(value, BaseModel):
            found.extend(_datetimes(value, f"{path}."))
    return found
