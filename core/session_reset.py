"""`SessionReset`: conversations that start afresh by themselves, as the peer bots do.

`[sessions] reset_idle = "8h"`: a person's message after that long without one starts a new
session; `reset_at = "04:00"`: the first message after that hour (in `timezone`, UTC unless
set) each day does. The old session is kept, as `/new` keeps it. Whether a session is due is a
pure function of its last activity and `now` (`due`); the intake asks it before a turn opens.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from core.scheduling.cadence import CadenceError, parse_duration, parse_timezone

__all__ = ["SessionReset"]


class SessionReset(BaseModel):
    """The profile's `[sessions]` table: when a conversation starts again by itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A duration ("8h", "30m", "1d"); None: never for idleness.
    reset_idle: timedelta | None = None
    # A time of day, "HH:MM", in `timezone`; None: never at an hour.
    reset_at: time | None = None
    timezone: str = "UTC"

    @field_validator("reset_idle", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return timedelta(seconds=parse_duration(value))
            except CadenceError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("reset_at", mode="before")
    @classmethod
    def _hour(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return time.fromisoformat(value.strip())
            except ValueError:
                raise ValueError(f"{value!r} is not a time of day such as 04:00") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            return parse_timezone(value).key
        except CadenceError as exc:
            raise ValueError(str(exc)) from None

    @property
    def enabled(self) -> bool:
        """Whether sessions ever reset by themselves."""
        return self.reset_idle is not None or self.reset_at is not None

    def due(self, last_active: datetime, now: datetime) -> bool:
        """Whether a session last active at `last_active` is over at `now` (both aware)."""
        if self.reset_idle is not None and now - last_active >= self.reset_idle:
            return True
        if self.reset_at is None:
            return False
        zone = parse_timezone(self.timezone)
        local = now.astimezone(zone)
        # The latest reset hour at or before now, in the zone (yesterday's when today's is to come).
        latest = datetime.combine(local.date(), self.reset_at, tzinfo=zone)
        if latest > local:
            latest = datetime.combine(local.date() - timedelta(days=1), self.reset_at, tzinfo=zone)
        return last_active < latest
