"""Runs that come late or not at all: the default misfire policy, the note on a late answer,
and the record of occurrences that never ran.

A reminder nobody saw is worth more late than never: a one-off runs late within
`ONE_OFF_GRACE` unless made with `skip`, and its answer says when it was due. A repeating
schedule skips what it missed (its next run comes anyway). Whatever is skipped leaves a
`missed` run saying why, so `schedule runs` never shows silence where a run was expected.

Pure functions of the times given: nothing here reads a clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from core.envelopes import new_id
from core.scheduling.cadence import LATE_TOLERANCE, Plan, parse_timezone
from core.scheduling.models import Cadence, IntervalCadence, Misfire, Schedule, ScheduleRun

__all__ = [
    "ONE_OFF_GRACE",
    "REPEATING_GRACE",
    "default_misfire",
    "late_note",
    "miss_window",
    "missed_run",
    "span",
    "zone_of",
]

# How late a one-off still runs by default (`run_once`): a day, so a reminder due while the
# machine slept or no chat was open still comes the next time one is.
ONE_OFF_GRACE = timedelta(hours=24)
# How late a repeating schedule made with `run_once` still runs by default.
REPEATING_GRACE = timedelta(minutes=5)


def default_misfire(cadence: Cadence, misfire: Misfire | None = None) -> tuple[Misfire, int]:
    """The misfire policy and grace (seconds) of a new schedule when not told otherwise: a
    one-off runs late within `ONE_OFF_GRACE`, a repeating schedule skips what it missed."""
    one_off = cadence.kind == "once"
    chosen: Misfire = misfire or ("run_once" if one_off else "skip")
    grace = ONE_OFF_GRACE if one_off else REPEATING_GRACE
    return chosen, int(grace.total_seconds())


def miss_window(schedule: Schedule) -> timedelta:
    """How late a run of `schedule` may start and still run (as `plan` decides it)."""
    if schedule.misfire == "run_once":
        return max(timedelta(seconds=schedule.grace_seconds), LATE_TOLERANCE)
    return LATE_TOLERANCE


def late_note(*, due_at: datetime, started_at: datetime, now: datetime, zone: str) -> str | None:
    """ "(due at 17:30 UTC, 12 minutes ago)" for a run that started later than
    `LATE_TOLERANCE` after its due time, the time read in `zone`; None for one on time.

    The date is added when the due time was on another day (in `zone`) than `now`.
    """
    if started_at - due_at <= LATE_TOLERANCE:
        return None
    place = _zone(zone)
    local_due, local_now = due_at.astimezone(place), now.astimezone(place)
    label = "UTC" if place.key == "UTC" else place.key
    day = "" if local_due.date() == local_now.date() else f" on {local_due:%a %d %b}"
    return f"(due at {local_due:%H:%M} {label}{day}, {span(now - due_at)} ago)"


def zone_of(cadence: Cadence) -> str:
    """The zone a cadence's times were given in (UTC for an interval)."""
    return "UTC" if isinstance(cadence, IntervalCadence) else cadence.timezone


def missed_run(schedule: Schedule, decision: Plan, now: datetime) -> ScheduleRun | None:
    """The record of the occurrences `decision` skips (None when it skips none): a `missed`
    run, due at the oldest of them, saying why they did not run."""
    if not decision.skipped or schedule.next_run_at is None:
        return None
    due = schedule.next_run_at
    since = f"{due.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if decision.fire is not None:
        # Not late past the grace: one run stands for every occurrence missed meanwhile.
        more = _plural(decision.skipped, "more run")
        why = f"{more} due since {since} skipped: one late run stands for them, never a burst"
    else:
        count = f"{decision.skipped} runs, the first " if decision.skipped > 1 else ""
        window = miss_window(schedule)
        why = f"{count}due {since}; {span(now - due)} late, past the {span(window)} grace"
    return ScheduleRun(
        id=new_id()[:12],
        schedule_id=schedule.id,
        due_at=due,
        started_at=now,
        finished_at=now,
        status="missed",
        error=why,
    )


def span(length: timedelta) -> str:
    """A length of time as people say it: "40 seconds", "12 minutes", "3 hours", "2 days"."""
    seconds = max(int(length.total_seconds()), 0)
    for unit, size, below in (
        ("second", 1, 90),
        ("minute", 60, 90 * 60),
        ("hour", 3600, 48 * 3600),
    ):
        if seconds < below:
            return _plural(seconds // size, unit)
    return _plural(seconds // 86_400, "day")


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _zone(name: str) -> ZoneInfo:
    try:
        return parse_timezone(name)
    except ValueError:
        return ZoneInfo("UTC")  # a stored zone that no longer exists: say it in UTC
