"""Cadence math: when a schedule runs next, what to do when it is late, and the parsers.

Everything here is a pure function of its arguments: the current time is always passed in, never
read from a clock. Datetimes going in must be timezone-aware (any zone); datetimes coming out
are timezone-aware UTC.

Occurrences of each cadence:

- ``once``: its ``at``, and nothing after it.
- ``interval``: ``start + k * seconds`` for k = 1, 2, ... -- the first run is one interval after
  ``start``, and every later one stays on that grid (in UTC seconds, so DST never moves it and
  a late run never makes it drift).
- ``cron``: the times croniter gives for the expression read as wall-clock time in the
  cadence's zone. On a spring-forward day a time the clocks skip runs at the first instant
  after the gap (``30 2 * * *`` in Europe/Paris runs at 03:00); on a fall-back day a time
  that happens twice runs twice, at two distinct instants. Results are always strictly
  increasing in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import assert_never
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.errors import SwitchboardError
from core.scheduling.models import Cadence, CronCadence, IntervalCadence, OnceCadence, Schedule

__all__ = [
    "CRON_COUNT_LIMIT",
    "LATE_TOLERANCE",
    "MAX_DURATION_SECONDS",
    "CadenceError",
    "Plan",
    "first_run",
    "make_cron",
    "next_after",
    "parse_at",
    "parse_duration",
    "parse_timezone",
    "plan",
]

# How late a run may start and still count as on time (the scheduler's own tick jitter).
LATE_TOLERANCE = timedelta(seconds=60)
# The longest duration `parse_duration` accepts.
MAX_DURATION_SECONDS = 366 * 86_400
# `plan` walks a cron cadence one occurrence at a time to count the ones it skips; past this
# many it stops counting (the number only feeds a log line, the walk would block the loop).
CRON_COUNT_LIMIT = 10_000

# croniter may hand back an instant we already passed; how many in a row we drop before
# declaring the expression stuck.
_CRON_STALL_LIMIT = 8
# A fixed point to check that a cron expression ever fires (croniter looks 50 years ahead).
_CRON_PROBE_FROM = datetime(2000, 1, 1, tzinfo=UTC)


class CadenceError(SwitchboardError, ValueError):
    """A duration, time, timezone or cron expression cannot be used; the message says why.

    Messages are one line and name no flag, so a caller can prefix its own context
    (``f"--every: {exc}"``).
    """


@dataclass(frozen=True, slots=True)
class Plan:
    """What a due schedule does now.

    ``fire`` is the occurrence to run now (None: run nothing); ``next_run_at`` is the next
    occurrence, always after ``now`` (None: nothing left to run); ``skipped`` counts the
    occurrences up to ``now`` that will never run (for cron it stops at ``CRON_COUNT_LIMIT``,
    so past that it is a lower bound).
    """

    fire: datetime | None
    next_run_at: datetime | None
    skipped: int = 0


# --- parsers -----------------------------------------------------------------------------

_DURATION_HINT = "use e.g. 30s, 5m, 90 minutes, 1.5h, 2 hours or 1d"
_UNIT_SECONDS: dict[str, int] = {
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604_800),
    **dict.fromkeys(("d", "day", "days"), 86_400),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
}
_BARE_SECONDS = re.compile(r"[0-9]+", re.ASCII)
_DURATION_SHAPE = re.compile(r"(?:[0-9]+\s*[a-z]+\s*)+", re.ASCII)
_DURATION_PART = re.compile(r"([0-9]+)\s*([a-z]+)", re.ASCII)


def parse_duration(text: str) -> int:
    """Seconds in a duration: ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``, ``2 minutes``, ``90``,
    ``hourly``, and what dateparser reads as a delay (``1.5h``, ``an hour``).

    In the compact forms units go from largest to smallest, each once; a bare number is
    seconds. Zero, negative, unknown and longer-than-366-days durations raise CadenceError.
    """
    shown = text.strip()
    cleaned = shown.lower()
    if not cleaned:
        raise CadenceError(f"a duration is required; {_DURATION_HINT}")
    if cleaned.startswith("-") and _seconds_in(cleaned[1:].strip()) is not None:
        raise CadenceError(f"{shown!r} is negative; a duration must be at least 1 second")
    seconds = _seconds_in(cleaned)
    if seconds is None:
        seconds = _natural_seconds(cleaned)
    if seconds is None:
        raise CadenceError(f"{shown!r} is not a duration; {_DURATION_HINT}")
    if seconds == 0:
        raise CadenceError(f"{shown!r} is zero; a duration must be at least 1 second")
    if seconds > MAX_DURATION_SECONDS:
        raise CadenceError(f"{shown!r} is too long; a duration may be at most 366 days")
    return seconds


def _seconds_in(cleaned: str) -> int | None:
    # Long inputs are nonsense anyway, and capping them keeps int() cheap.
    if len(cleaned) > 64:
        return None
    if _BARE_SECONDS.fullmatch(cleaned):
        return int(cleaned)
    if not _DURATION_SHAPE.fullmatch(cleaned):
        return None
    total = 0
    previous_unit: int | None = None
    for part in _DURATION_PART.finditer(cleaned):
        unit = _UNIT_SECONDS.get(part[2])
        # Largest unit first, each once: "30m1h" and "5m5m" are typos, not durations.
        if unit is None or (previous_unit is not None and unit >= previous_unit):
            return None
        previous_unit = unit
        total += int(part[1]) * unit
    return total


# Words people use for a period; everything else beyond the compact forms goes to dateparser.
_PERIOD_WORDS: dict[str, int] = {"hourly": 3_600, "daily": 86_400, "weekly": 604_800}
# Any fixed instant works as the base of a relative phrase; one far from DST changes is clearer.
_DURATION_BASE = datetime(2001, 1, 1, tzinfo=UTC)
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}", re.ASCII)


def _natural_seconds(cleaned: str) -> int | None:
    """Seconds in what people type beyond the compact forms ("1.5h", "an hour and a half",
    "hourly"), read by dateparser as a delay from a fixed instant; None if it cannot tell."""
    if cleaned in _PERIOD_WORDS:
        return _PERIOD_WORDS[cleaned]
    # The compact shape with units out of order ("30m1h", "5m5m") is a typo, not a sum.
    if len(cleaned) > 64 or not cleaned.isascii() or _DURATION_SHAPE.fullmatch(cleaned):
        return None
    if cleaned.startswith("-"):
        return None
    later = _dateparser(f"in {cleaned}", zone=ZoneInfo("UTC"), base=_DURATION_BASE)
    if later is None:
        return None
    seconds = (later.replace(tzinfo=UTC) - _DURATION_BASE).total_seconds()
    return round(seconds) if seconds >= 1 else None


def _dateparser(text: str, *, zone: ZoneInfo, base: datetime) -> datetime | None:
    """The wall time in `zone` that `text` names as dateparser reads it (English, future
    preferred, relative to `base`); naive, or None when it is not a time.

    The result is left naive on purpose: dateparser applies the offset `base` has, which is
    wrong across a DST change ("tomorrow 9:00" on the day clocks go forward), so the caller
    puts it in the zone with zoneinfo.
    """
    # Imported on first use: it is only needed past the forms parsed here by hand.
    import dateparser

    settings = {
        "RELATIVE_BASE": base.astimezone(zone).replace(tzinfo=None),
        "TIMEZONE": zone.key,
        "RETURN_AS_TIMEZONE_AWARE": False,
        "PREFER_DATES_FROM": "future",
    }
    try:
        parsed = dateparser.parse(text, languages=["en"], settings=settings)
    except (ValueError, OverflowError):
        return None
    return parsed if isinstance(parsed, datetime) else None


_ZONE_HINT = "use an IANA name such as Europe/Paris, America/New_York or UTC"
# IANA names are ASCII words joined by "/"; anything else (dots, absolute paths, NULs) is
# refused before the name gets near the filesystem lookup ZoneInfo does.
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*", re.ASCII)


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA timezone called `name` (``Europe/Paris``, ``UTC``); CadenceError if unknown."""
    cleaned = name.strip()
    if cleaned.upper() == "UTC":
        return ZoneInfo("UTC")
    # "localtime" is the host's zone, which would make a schedule depend on the machine.
    if len(cleaned) > 64 or cleaned == "localtime" or not _ZONE_NAME.fullmatch(cleaned):
        raise CadenceError(f"{cleaned!r} is not a timezone name; {_ZONE_HINT}")
    try:
        return ZoneInfo(cleaned)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CadenceError(f"unknown timezone {cleaned!r}; {_ZONE_HINT}") from exc


_AT_HINT = (
    "use a time such as 2025-06-01T09:00, 'tomorrow 9:00' or 'friday at 17:30', "
    "or a delay such as 'in 10 minutes'"
)


def parse_at(text: str, *, tz: str = "UTC", now: datetime) -> datetime:
    """The instant `text` names, in UTC: an ISO 8601 time, ``in <duration>`` from `now`, or
    what dateparser reads as a future time ("tomorrow 9:00", "friday at 17:30", "9pm").

    A time without an offset is read in `tz`; one the clocks skip (a DST gap) is refused, one
    they pass twice is its first occurrence. A weekday that is today (in `tz`) means today
    while its time is still ahead ("friday 17:30" on a Friday morning), next week's with
    "next". A time before `now` raises CadenceError.
    """
    now = _utc(now, "now")
    zone = parse_timezone(tz)
    cleaned = text.strip()
    if not cleaned:
        raise CadenceError(f"a time is required; {_AT_HINT}")
    first, _, rest = cleaned.partition(" ")
    if first.lower() == "in":
        return now + timedelta(seconds=parse_duration(rest))
    try:
        at = _parse_iso(cleaned, zone)
    except CadenceError:
        # "tomorrow 9:00", "friday at 17:30", "9pm": what people type, read in `tz`.
        if _ISO_DATE.match(cleaned) or len(cleaned) > 100:
            raise  # meant as ISO 8601: a bad one is refused, not guessed at
        found = _dateparser(cleaned, zone=zone, base=now)
        if found is None:
            raise
        found = _today_if_ahead(found, cleaned, now.astimezone(zone).replace(tzinfo=None))
        at = _in_zone(found, zone, cleaned).astimezone(UTC)
    if at < now:
        raise CadenceError(f"{cleaned!r} ({at:%Y-%m-%d %H:%M:%S} UTC) is in the past")
    return at


# Weekday names and their usual short forms, by `datetime.weekday()`.
_WEEKDAY_WORDS = (
    ("monday", "mon"),
    ("tuesday", "tue", "tues"),
    ("wednesday", "wed"),
    ("thursday", "thu", "thur", "thurs"),
    ("friday", "fri"),
    ("saturday", "sat"),
    ("sunday", "sun"),
)
_WORD = re.compile(r"[a-z]+", re.ASCII)


def _today_if_ahead(found: datetime, cleaned: str, local_now: datetime) -> datetime:
    """dateparser reads "friday 17:30" said on a Friday morning as next week's Friday; a
    person means today when that time is still ahead (as on any other day: "friday" on a
    Thursday is tomorrow). "next friday" keeps next week. Naive wall times in the zone."""
    words = set(_WORD.findall(cleaned.lower()))
    today = local_now.date()
    if "next" in words or not words & set(_WEEKDAY_WORDS[today.weekday()]):
        return found
    earlier = found - timedelta(days=7)
    if earlier.date() == today and earlier > local_now:
        return earlier
    return found


def _parse_iso(cleaned: str, zone: ZoneInfo) -> datetime:
    try:
        parsed = datetime.fromisoformat(cleaned)
    except ValueError as exc:
        raise CadenceError(f"{cleaned!r} is not a time; {_AT_HINT}") from exc
    if parsed.tzinfo is None:
        parsed = _in_zone(parsed, zone, cleaned)
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise CadenceError(f"{cleaned!r} is out of range; {_AT_HINT}") from exc


def _in_zone(wall: datetime, zone: ZoneInfo, cleaned: str) -> datetime:
    """A naive wall time read in `zone`; `CadenceError` for one the clocks skip (a DST gap)."""
    local = wall.replace(tzinfo=zone)
    # A wall time inside a DST gap does not survive the round trip through UTC.
    if local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        raise CadenceError(
            f"{cleaned!r} does not exist in {zone.key} (the clocks skip it that day)"
        )
    return local


_CRON_FIELDS = "minute hour day-of-month month day-of-week"


def make_cron(expression: str, timezone: str = "UTC") -> CronCadence:
    """A CronCadence for a 5-field expression read in `timezone`, checked to be valid and to fire.

    Seconds or year fields, ``@daily``-style aliases, bad values and expressions that never
    match (``0 0 30 2 *``) raise CadenceError.
    """
    fields = expression.split()
    shown = " ".join(fields)
    if len(fields) in (6, 7):
        raise CadenceError(
            f"{shown!r} has {len(fields)} fields; use 5 ({_CRON_FIELDS}), without seconds or years"
        )
    if len(fields) != 5:
        raise CadenceError(
            f"{shown!r} is not a cron expression; use 5 fields ({_CRON_FIELDS}), e.g. '0 9 * * 1-5'"
        )
    # croniter is imported where a cron expression is read: it is a hundredth of a second of
    # every process's start-up otherwise (`switchboard chat`), most of which never read one.
    from croniter import CroniterError, croniter

    try:
        croniter.expand(shown)
    except (CroniterError, TypeError) as exc:
        raise CadenceError(f"{shown!r} is not a valid cron expression: {exc}") from exc
    zone = parse_timezone(timezone)
    cadence = CronCadence(expression=shown, timezone=zone.key)
    if _cron_next(cadence, _CRON_PROBE_FROM) is None:
        raise CadenceError(f"{shown!r} never fires (no date matches it)")
    return cadence


# --- occurrences -------------------------------------------------------------------------


def first_run(cadence: Cadence, now: datetime) -> datetime | None:
    """When a new schedule with this cadence first runs, seen from `now`.

    once: its ``at`` (the caller checked it is not past); interval: the first ``start + k *
    seconds`` (k >= 1) after `now`, so ``start + seconds`` for a fresh start; cron: the first
    time strictly after `now`. None if a cron expression never fires again.
    """
    now = _utc(now, "now")
    if isinstance(cadence, OnceCadence):
        return _utc(cadence.at, "at")
    return _occurrence_after(cadence, now)


def next_after(cadence: Cadence, due: datetime) -> datetime | None:
    """The occurrence after occurrence `due`: None for once, ``due + seconds`` for an interval
    (snapped to the grid anchored at ``start``), the next cron time for cron."""
    due = _utc(due, "due")
    if isinstance(cadence, OnceCadence):
        return None
    return _occurrence_after(cadence, due)


def _occurrence_after(cadence: Cadence, after: datetime) -> datetime | None:
    """The first occurrence strictly after `after` (UTC)."""
    match cadence:
        case OnceCadence():
            at = _utc(cadence.at, "at")
            return at if at > after else None
        case IntervalCadence():
            start, step = _grid(cadence)
            return start + max(1, (after - start) // step + 1) * step
        case CronCadence():
            return _cron_next(cadence, after)
        case _:
            assert_never(cadence)


def _grid(cadence: IntervalCadence) -> tuple[datetime, timedelta]:
    # In UTC: adding to a datetime in a DST zone would add wall-clock time instead.
    return _utc(cadence.start, "start"), timedelta(seconds=cadence.seconds)


def _cron_next(cadence: CronCadence, after: datetime) -> datetime | None:
    return next(_cron_occurrences(cadence, after), None)


def _cron_occurrences(cadence: CronCadence, after: datetime) -> Iterator[datetime]:
    """Cron times strictly after `after`, in UTC, strictly increasing; ends if none are left."""
    from croniter import CroniterBadDateError, CroniterError, croniter

    zone = parse_timezone(cadence.timezone)
    try:
        times = croniter(cadence.expression, after.astimezone(zone))
    except (CroniterError, TypeError) as exc:
        raise CadenceError(f"{cadence.expression!r} is not a valid cron expression: {exc}") from exc
    last = after
    # A job at a fixed hour runs once when the clocks go back and its time happens twice (as
    # classic cron does): only the first of the two instants counts. Jobs on a wildcard hour
    # keep their rhythm through the repeated hour.
    fixed_hour = "*" not in cadence.expression.split()[1]
    stalled = 0
    while True:
        try:
            local: datetime = times.get_next(datetime)
        except (CroniterBadDateError, OverflowError):
            return
        candidate = local.astimezone(UTC)
        repeated = fixed_hour and _second_of_two(local, zone, candidate)
        # Around DST changes wall-clock arithmetic could step back; never repeat an instant.
        if candidate > last and not repeated:
            stalled = 0
            last = candidate
            yield candidate
            continue
        if candidate > last:
            last = candidate
            continue
        stalled += 1
        if stalled > _CRON_STALL_LIMIT:
            raise CadenceError(
                f"cron {cadence.expression!r} in {cadence.timezone} does not advance past "
                f"{last.isoformat()}"
            )


# --- misfires ----------------------------------------------------------------------------


def plan(schedule: Schedule, now: datetime) -> Plan:
    """Decide what a schedule whose ``next_run_at`` has come does at `now`.

    Every occurrence from ``next_run_at`` up to `now` is missed but at most one runs:

    - ``skip``: the oldest missed occurrence (``next_run_at``) runs if it is at most
      ``LATE_TOLERANCE`` late; the others are skipped.
    - ``run_once``: the newest missed occurrence runs if it is at most
      ``max(grace_seconds, LATE_TOLERANCE)`` late; the others are skipped. After a long
      outage this is one catch-up run, never a burst.

    ``next_run_at`` becomes the first occurrence after `now` (None for ``once``). A schedule
    not yet due comes back unchanged; ``status`` is the caller's business.
    """
    now = _utc(now, "now")
    if schedule.next_run_at is None:
        return Plan(fire=None, next_run_at=None)
    due = _utc(schedule.next_run_at, "next_run_at")
    if due > now:
        return Plan(fire=None, next_run_at=due)
    cadence = schedule.cadence
    following = None if isinstance(cadence, OnceCadence) else _occurrence_after(cadence, now)
    newest, missed = _missed(cadence, due, now)
    if schedule.misfire == "run_once":
        candidate = newest
        window = max(timedelta(seconds=schedule.grace_seconds), LATE_TOLERANCE)
    else:
        candidate, window = due, LATE_TOLERANCE
    if now - candidate <= window:
        return Plan(fire=candidate, next_run_at=following, skipped=missed - 1)
    return Plan(fire=None, next_run_at=following, skipped=missed)


def _missed(cadence: Cadence, due: datetime, now: datetime) -> tuple[datetime, int]:
    """The newest occurrence in [due, now] and how many there are; `due` counts as one."""
    match cadence:
        case OnceCadence():
            return due, 1
        case IntervalCadence():
            start, step = _grid(cadence)
            # Grid points start + k * step (k >= 1) at or before a time: max(0, its index).
            before_due = max(0, (due - start) // step)
            before_now = max(0, (now - start) // step)
            later = before_now - before_due
            return (start + before_now * step if later > 0 else due), 1 + later
        case CronCadence():
            return _cron_missed(cadence, due, now)
        case _:
            assert_never(cadence)


def _second_of_two(local: datetime, zone: ZoneInfo, instant: datetime) -> bool:
    """Whether `instant` is the later of two instants sharing its wall-clock time (DST end)."""
    first = local.replace(tzinfo=None).replace(tzinfo=zone, fold=0).astimezone(UTC)
    return first != instant


def _cron_missed(cadence: CronCadence, due: datetime, now: datetime) -> tuple[datetime, int]:
    newest, count = due, 1
    for occurrence in _cron_occurrences(cadence, due):
        if occurrence > now:
            return newest, count
        newest, count = occurrence, count + 1
        if count >= CRON_COUNT_LIMIT:
            break
    else:
        return newest, count
    # Too many to count: find the newest one at or before `now` directly, then make sure
    # nothing between it and `now` was missed.
    newest = max(newest, _cron_at_or_before(cadence, now))
    for occurrence in _cron_occurrences(cadence, newest):
        if occurrence > now:
            break
        newest = occurrence
    return newest, count


def _cron_at_or_before(cadence: CronCadence, now: datetime) -> datetime:
    from croniter import croniter

    zone = parse_timezone(cadence.timezone)
    # croniter's get_prev is strictly before its start; a microsecond later includes `now`.
    times = croniter(cadence.expression, (now + timedelta(microseconds=1)).astimezone(zone))
    local: datetime = times.get_prev(datetime)
    return local.astimezone(UTC)


def _utc(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value.astimezone(UTC)
