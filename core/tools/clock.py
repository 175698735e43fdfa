"""The `current_time` tool: the turn's clock, shown in a time zone the model names."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from core.clock import english_date
from core.errors import ToolError
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = ["CurrentTimeArgs", "current_time_tool", "describe_time"]

# IANA names are path-like words ("America/Port-au-Prince", "Etc/GMT+5"); no dots, so no
# "../etc" or "zone.tab" ever reaches the filesystem lookup.
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
_MAX_ZONE_NAME = 64

# Fixed English names: strftime's %A and %B follow the process locale.


class CurrentTimeArgs(BaseModel):
    """Arguments of the `current_time` tool."""

    timezone: str | None = Field(
        default=None,
        max_length=_MAX_ZONE_NAME,
        description=(
            "IANA time zone name such as 'Europe/Paris', 'America/New_York' or 'Asia/Tokyo'. "
            "Default: UTC."
        ),
    )


def current_time_tool() -> Tool[CurrentTimeArgs]:
    """A fresh `current_time` tool reading the turn's `ToolContext.clock`."""
    return Tool(
        name="current_time",
        description=(
            "Get the current date, time and weekday, in UTC or in a given IANA time zone."
        ),
        args=CurrentTimeArgs,
        tier=SafetyTier.READ_ONLY,
        run=_run_current_time,
    )


async def _run_current_time(args: CurrentTimeArgs, context: ToolContext) -> str:
    name = (args.timezone or "").strip() or "UTC"
    # Loading a zone reads its TZif file the first time; keep that off the event loop.
    zone = UTC if name == "UTC" else await asyncio.to_thread(_zone, name)
    return describe_time(context.clock(), zone, name)


def describe_time(now: datetime, zone: tzinfo, name: str) -> str:
    """One line such as '2026-11-22 03:04:05 CET (UTC+01:00, Europe/Paris), Sunday 22 November
    2026' for the aware datetime `now` seen in `zone`, which is called `name`."""
    if now.tzinfo is None:
        raise ValueError("the clock returned a naive datetime; clocks must be timezone-aware")
    local = now.astimezone(zone)
    offset = _format_offset(local.utcoffset() or timedelta(0))
    date = english_date(local)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()} ({offset}, {name}), {date}"


def _zone(name: str) -> ZoneInfo:
    if len(name) <= _MAX_ZONE_NAME and _ZONE_NAME.fullmatch(name):
        try:
            return ZoneInfo(name)
        # Not found, not a TZif file ("leapseconds"), or a directory ("Europe").
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ToolError(f"Unknown timezone {name!r}; use an IANA name such as Europe/Paris.")


def _format_offset(offset: timedelta) -> str:
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"UTC{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text
