"""Cadence math and parsers: occurrences, DST and month ends, misfires, with fixed times only."""

from __future__ import annotations

import bisect
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from core.envelopes import Address
from core.errors import SwitchboardError
from core.scheduling.cadence import (
    CRON_COUNT_LIMIT,
    LATE_TOLERANCE,
    CadenceError,
    Plan,
    first_run,
    make_cron,
    next_after,
    parse_at,
    parse_duration,
    parse_timezone,
    plan,
)
from core.scheduling.models import Cadence, CronCadence, IntervalCadence, OnceCadence, Schedule

PARIS = ZoneInfo("Europe/Paris")
DURATION_HINT = "use e.g. 30s, 5m, 90 minutes, 1.5h, 2 hours or 1d"
ZONE_HINT = "use an IANA name such as Europe/Paris, America/New_York or UTC"
AT_HINT = (
    "use a time such as 2025-06-01T09:00, 'tomorrow 9:00' or 'friday at 17:30', "
    "or a delay such as 'in 10 minutes'"
)
CRON_FIELDS = "minute hour day-of-month month day-of-week"


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def chain(cadence: Cadence, first: datetime, count: int) -> list[datetime]:
    """`first` and the occurrences after it, by repeated `next_after`."""
    times = [first]
    while len(times) < count:
        following = next_after(cadence, times[-1])
        assert following is not None
        times.append(following)
    return times


def schedule(
    cadence: Cadence,
    next_run_at: datetime | None,
    *,
    misfire: str = "skip",
    grace_seconds: int = 300,
) -> Schedule:
    return Schedule.model_validate(
        {
            "id": "s1",
            "cadence": cadence,
            "prompt": "summarise the news",
            "deliver_to": Address(platform="telegram", chat="42"),
            "owner": "cli",
            "next_run_at": next_run_at,
            "misfire": misfire,
            "grace_seconds": grace_seconds,
            "created_at": utc(2025, 1, 1),
            "updated_at": utc(2025, 1, 1),
        }
    )


# --- parse_duration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7_200),
        ("1d", 86_400),
        ("1w", 604_800),
        ("90", 90),
        ("1h30m", 5_400),
        ("1h 30m 15s", 5_415),
        ("2 minutes", 120),
        ("1 minute", 60),
        ("10 seconds", 10),
        ("3 hours", 10_800),
        ("3 HOURS", 10_800),
        ("  5M  ", 300),
        ("1d12h", 129_600),
        ("366d", 366 * 86_400),
        # Past the compact forms: what people type, read by dateparser.
        ("1.5h", 5_400),
        ("1.5 hours", 5_400),
        ("1h30", 5_400),
        ("an hour", 3_600),
        ("90 min", 5_400),
        ("hourly", 3_600),
        ("daily", 86_400),
    ],
)
def test_parse_duration_reads_units_and_bare_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"a duration is required; {DURATION_HINT}"),
        ("   ", f"a duration is required; {DURATION_HINT}"),
        ("soon", f"'soon' is not a duration; {DURATION_HINT}"),
        ("5x", f"'5x' is not a duration; {DURATION_HINT}"),
        ("m", f"'m' is not a duration; {DURATION_HINT}"),
        ("30m1h", f"'30m1h' is not a duration; {DURATION_HINT}"),
        ("5m5m", f"'5m5m' is not a duration; {DURATION_HINT}"),
        ("-soon", f"'-soon' is not a duration; {DURATION_HINT}"),
        ("\u0663s", f"'\u0663s' is not a duration; {DURATION_HINT}"),
        ("0", "'0' is zero; a duration must be at least 1 second"),
        ("0s", "'0s' is zero; a duration must be at least 1 second"),
        ("0h 0m", "'0h 0m' is zero; a duration must be at least 1 second"),
        ("-5m", "'-5m' is negative; a duration must be at least 1 second"),
        ("367d", "'367d' is too long; a duration may be at most 366 days"),
        ("53w", "'53w' is too long; a duration may be at most 366 days"),
        ("9" * 40, f"'{'9' * 40}' is too long; a duration may be at most 366 days"),
    ],
)
def test_parse_duration_refuses_with_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(CadenceError) as caught:
        parse_duration(text)
    assert str(caught.value) == message


def test_cadence_error_is_a_value_error_in_the_switchboard_tree() -> None:
    with pytest.raises(CadenceError) as caught:
        parse_duration("soon")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, SwitchboardError)


# --- parse_timezone ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Europe/Paris", "Europe/Paris"),
        ("UTC", "UTC"),
        ("utc", "UTC"),
        (" America/New_York ", "America/New_York"),
        ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
        ("Etc/GMT+5", "Etc/GMT+5"),
    ],
)
def test_parse_timezone_knows_iana_names(name: str, key: str) -> None:
    assert parse_timezone(name).key == key


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Mars/Olympus", f"unknown timezone 'Mars/Olympus'; {ZONE_HINT}"),
        ("America", f"unknown timezone 'America'; {ZONE_HINT}"),
        ("../etc/passwd", f"'../etc/passwd' is not a timezone name; {ZONE_HINT}"),
        ("/etc/localtime", f"'/etc/localtime' is not a timezone name; {ZONE_HINT}"),
        ("Europe//Paris", f"'Europe//Paris' is not a timezone name; {ZONE_HINT}"),
        ("Europe/Paris\x00", f"'Europe/Paris\\x00' is not a timezone name; {ZONE_HINT}"),
        ("localtime", f"'localtime' is not a timezone name; {ZONE_HINT}"),
        ("", f"'' is not a timezone name; {ZONE_HINT}"),
    ],
)
def test_parse_timezone_refuses_unknown_names_and_paths(name: str, message: str) -> None:
    with pytest.raises(CadenceError) as caught:
        parse_timezone(name)
    assert str(caught.value) == message


# --- parse_at ---------------------------------------------------------------------------

NOW = utc(2025, 3, 29, 12, 0)


@pytest.mark.parametrize(
    ("text", "tz", "expected"),
    [
        ("in 10 minutes", "UTC", utc(2025, 3, 29, 12, 10)),
        ("in 2s", "UTC", utc(2025, 3, 29, 12, 0, 2)),
        ("IN 1h30m", "Europe/Paris", utc(2025, 3, 29, 13, 30)),
        ("2025-06-01T09:00+05:30", "Europe/Paris", utc(2025, 6, 1, 3, 30)),
        ("2025-06-01T09:00Z", "Europe/Paris", utc(2025, 6, 1, 9, 0)),
        ("2025-06-01T09:00", "UTC", utc(2025, 6, 1, 9, 0)),
        ("2025-06-01 09:00", "UTC", utc(2025, 6, 1, 9, 0)),
        # Naive times are read in the zone: summer and winter offsets differ.
        ("2025-06-01T09:00", "Europe/Paris", utc(2025, 6, 1, 7, 0)),
        ("2025-12-01T09:00", "Europe/Paris", utc(2025, 12, 1, 8, 0)),
        # 02:30 happens twice on the fall-back day; the first one is meant.
        ("2025-10-26T02:30", "Europe/Paris", utc(2025, 10, 26, 0, 30)),
        # What people type, read by dateparser in the zone (Paris is UTC+1 until the 30th).
        ("tomorrow 9:00", "Europe/Paris", utc(2025, 3, 30, 7, 0)),
        ("tomorrow", "UTC", utc(2025, 3, 30, 12, 0)),
        ("monday at 17:30", "UTC", utc(2025, 3, 31, 17, 30)),
        ("9pm", "UTC", utc(2025, 3, 29, 21, 0)),
        # Exactly now is not in the past.
        ("2025-03-29T12:00:00+00:00", "UTC", NOW),
    ],
)
def test_parse_at_reads_iso_times_and_delays(text: str, tz: str, expected: datetime) -> None:
    at = parse_at(text, tz=tz, now=NOW)
    assert at == expected
    assert at.tzinfo is UTC


# 2026-11-27 is a Friday.
FRIDAY_MORNING = utc(2026, 11, 27, 9, 0)


@pytest.mark.parametrize(
    ("text", "now", "tz", "expected"),
    [
        # The weekday is today and its time still ahead: today, not next week.
        ("friday 17:30", FRIDAY_MORNING, "UTC", utc(2026, 11, 27, 17, 30)),
        ("friday at 17:30", FRIDAY_MORNING, "UTC", utc(2026, 11, 27, 17, 30)),
        ("Fri 5:30pm", FRIDAY_MORNING, "UTC", utc(2026, 11, 27, 17, 30)),
        ("on friday at 17:30", FRIDAY_MORNING, "UTC", utc(2026, 11, 27, 17, 30)),
        # Today in the zone it is read in: 09:00 UTC is 10:00 in Paris, still Friday.
        ("friday 17:30", FRIDAY_MORNING, "Europe/Paris", utc(2026, 11, 27, 16, 30)),
        # The time has passed today: next week.
        ("friday 17:30", utc(2026, 11, 27, 18, 0), "UTC", utc(2026, 12, 4, 17, 30)),
        # 23:30 UTC on Friday is already Saturday in Paris: Friday is next week there.
        ("friday 17:30", utc(2026, 11, 27, 23, 30), "Europe/Paris", utc(2026, 12, 4, 16, 30)),
        # "next friday" said on a Friday means next week's.
        ("next friday 17:30", FRIDAY_MORNING, "UTC", utc(2026, 12, 4, 17, 30)),
        # Another weekday is unchanged: the coming one.
        ("thursday 10:00", FRIDAY_MORNING, "UTC", utc(2026, 12, 3, 10, 0)),
        ("saturday 10:00", FRIDAY_MORNING, "UTC", utc(2026, 11, 28, 10, 0)),
    ],
)
def test_parse_at_a_weekday_that_is_today_with_its_time_ahead_means_today(
    text: str, now: datetime, tz: str, expected: datetime
) -> None:
    assert parse_at(text, tz=tz, now=now) == expected


def test_parse_at_is_relative_to_the_given_now_in_any_zone() -> None:
    now = datetime(2025, 3, 29, 13, 0, tzinfo=PARIS)
    assert parse_at("in 5m", now=now) == utc(2025, 3, 29, 12, 5)


@pytest.mark.parametrize(
    ("text", "tz", "message"),
    [
        ("", "UTC", f"a time is required; {AT_HINT}"),
        ("the day after soon", "UTC", f"'the day after soon' is not a time; {AT_HINT}"),
        ("yesterday", "UTC", "'yesterday' (2025-03-28 12:00:00 UTC) is in the past"),
        ("2025-13-01T09:00", "UTC", f"'2025-13-01T09:00' is not a time; {AT_HINT}"),
        ("in soon", "UTC", f"'soon' is not a duration; {DURATION_HINT}"),
        ("in 0s", "UTC", "'0s' is zero; a duration must be at least 1 second"),
        ("in", "UTC", f"a duration is required; {DURATION_HINT}"),
        (
            "2025-03-29T11:59",
            "UTC",
            "'2025-03-29T11:59' (2025-03-29 11:59:00 UTC) is in the past",
        ),
        (
            "2025-03-29T12:30",
            "Europe/Paris",
            "'2025-03-29T12:30' (2025-03-29 11:30:00 UTC) is in the past",
        ),
        (
            "2025-03-30T02:30",
            "Europe/Paris",
            "'2025-03-30T02:30' does not exist in Europe/Paris (the clocks skip it that day)",
        ),
        ("2025-06-01T09:00", "Mars/Olympus", f"unknown timezone 'Mars/Olympus'; {ZONE_HINT}"),
    ],
)
def test_parse_at_refuses_with_one_clear_line(text: str, tz: str, message: str) -> None:
    with pytest.raises(CadenceError) as caught:
        parse_at(text, tz=tz, now=NOW)
    assert str(caught.value) == message


def test_a_naive_now_is_a_programming_error_not_a_user_error() -> None:
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(ValueError, match="now must be a timezone-aware datetime") as caught:
        parse_at("in 5m", now=naive)
    assert not isinstance(caught.value, CadenceError)


# --- make_cron --------------------------------------------------------------------------


def test_make_cron_normalises_whitespace_and_the_zone_name() -> None:
    assert make_cron("  0  9 *\t* 1-5 ", "utc") == CronCadence(
        expression="0 9 * * 1-5", timezone="UTC"
    )
    assert make_cron("30 2 * * *", "Europe/Paris").timezone == "Europe/Paris"
    assert make_cron("0 9 * * MON-FRI", "UTC").expression == "0 9 * * MON-FRI"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "* * * * * *",
            f"'* * * * * *' has 6 fields; use 5 ({CRON_FIELDS}), without seconds or years",
        ),
        (
            "0 0 9 * * * 2030",
            f"'0 0 9 * * * 2030' has 7 fields; use 5 ({CRON_FIELDS}), without seconds or years",
        ),
        (
            "0 9 * *",
            f"'0 9 * *' is not a cron expression; use 5 fields ({CRON_FIELDS}), e.g. '0 9 * * 1-5'",
        ),
        (
            "@daily",
            f"'@daily' is not a cron expression; use 5 fields ({CRON_FIELDS}), e.g. '0 9 * * 1-5'",
        ),
        (
            "",
            f"'' is not a cron expression; use 5 fields ({CRON_FIELDS}), e.g. '0 9 * * 1-5'",
        ),
        (
            "60 * * * *",
            "'60 * * * *' is not a valid cron expression: [60 * * * *] is not acceptable, "
            "out of range",
        ),
        ("0 25 * * *", None),
        ("0 9 0 * *", None),
        ("0 9 * 13 *", None),
        ("0 9 * * 8", None),
        ("*/0 * * * *", None),
        ("a b c d e", None),
        ("H * * * *", None),
        ("0 0 30 2 *", "'0 0 30 2 *' never fires (no date matches it)"),
        ("0 0 31 4 *", "'0 0 31 4 *' never fires (no date matches it)"),
    ],
)
def test_make_cron_refuses_bad_expressions(expression: str, message: str | None) -> None:
    with pytest.raises(CadenceError) as caught:
        make_cron(expression, "UTC")
    expected = message or f"{expression!r} is not a valid cron expression: "
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


def test_make_cron_refuses_an_unknown_zone() -> None:
    with pytest.raises(CadenceError, match="unknown timezone 'Nowhere/Land'"):
        make_cron("0 9 * * *", "Nowhere/Land")


# --- first_run and next_after -----------------------------------------------------------


def test_once_runs_at_its_time_and_then_never() -> None:
    cadence = OnceCadence(at=datetime(2025, 6, 1, 9, 0, tzinfo=PARIS))
    first = first_run(cadence, NOW)
    assert first == utc(2025, 6, 1, 7, 0)
    assert first is not None and first.tzinfo is UTC
    assert next_after(cadence, utc(2025, 6, 1, 7, 0)) is None


def test_interval_first_runs_one_interval_after_start() -> None:
    cadence = IntervalCadence(seconds=300, start=NOW)
    assert first_run(cadence, NOW) == utc(2025, 3, 29, 12, 5)
    assert chain(cadence, utc(2025, 3, 29, 12, 5), 3) == [
        utc(2025, 3, 29, 12, 5),
        utc(2025, 3, 29, 12, 10),
        utc(2025, 3, 29, 12, 15),
    ]


def test_interval_with_a_future_start_still_waits_one_interval() -> None:
    cadence = IntervalCadence(seconds=3_600, start=utc(2025, 4, 1, 9, 0))
    assert first_run(cadence, NOW) == utc(2025, 4, 1, 10, 0)


def test_interval_with_an_old_start_runs_next_on_its_grid() -> None:
    cadence = IntervalCadence(seconds=3_600, start=utc(2025, 1, 1, 0, 20))
    assert first_run(cadence, NOW) == utc(2025, 3, 29, 12, 20)
    # On a grid point exactly: strictly after.
    assert first_run(cadence, utc(2025, 3, 29, 12, 20)) == utc(2025, 3, 29, 13, 20)


def test_interval_is_anchored_to_start_and_never_drifts() -> None:
    cadence = IntervalCadence(seconds=600, start=utc(2025, 1, 1, 9, 0))
    assert next_after(cadence, utc(2025, 1, 1, 9, 10)) == utc(2025, 1, 1, 9, 20)
    # A due time off the grid (a stored value from elsewhere) snaps back onto it.
    assert next_after(cadence, utc(2025, 1, 1, 9, 13, 7)) == utc(2025, 1, 1, 9, 20)


def test_interval_across_dst_is_a_fixed_number_of_seconds() -> None:
    # Noon in Paris the day before spring-forward; a day later it is 13:00 on the clock.
    cadence = IntervalCadence(seconds=86_400, start=datetime(2025, 3, 29, 12, 0, tzinfo=PARIS))
    assert first_run(cadence, utc(2025, 3, 29, 11, 0)) == utc(2025, 3, 30, 11, 0)
    assert next_after(cadence, utc(2025, 3, 30, 11, 0)) == utc(2025, 3, 31, 11, 0)
    hourly = IntervalCadence(seconds=3_600, start=datetime(2025, 10, 26, 1, 0, tzinfo=PARIS))
    assert chain(hourly, utc(2025, 10, 26, 0, 0), 4) == [
        utc(2025, 10, 26, 0, 0),
        utc(2025, 10, 26, 1, 0),
        utc(2025, 10, 26, 2, 0),
        utc(2025, 10, 26, 3, 0),
    ]


def test_cron_first_run_is_strictly_after_now_in_the_cadence_zone() -> None:
    cadence = make_cron("0 9 * * *", "Europe/Paris")
    assert first_run(cadence, utc(2025, 1, 15, 12, 0)) == utc(2025, 1, 16, 8, 0)
    assert first_run(cadence, utc(2025, 7, 15, 12, 0)) == utc(2025, 7, 16, 7, 0)
    # Exactly on an occurrence: the next one.
    assert first_run(cadence, utc(2025, 7, 16, 7, 0)) == utc(2025, 7, 17, 7, 0)
    assert first_run(cadence, utc(2025, 7, 16, 6, 59, 59, 999_999)) == utc(2025, 7, 16, 7, 0)


def test_cron_results_are_utc() -> None:
    following = next_after(make_cron("0 9 * * *", "Europe/Paris"), utc(2025, 1, 15, 8, 0))
    assert following == utc(2025, 1, 16, 8, 0)
    assert following is not None and following.tzinfo is UTC


def test_cron_with_no_time_left_has_no_next_run() -> None:
    # Stored records skip make_cron's checks; the math still answers instead of looping.
    never = CronCadence(expression="0 0 30 2 *", timezone="UTC")
    assert first_run(never, NOW) is None
    assert next_after(make_cron("0 0 * * *", "UTC"), utc(9999, 12, 31, 12)) is None


def test_a_stored_cron_that_does_not_parse_raises_cadence_error() -> None:
    with pytest.raises(CadenceError, match="'every day' is not a valid cron expression"):
        first_run(CronCadence(expression="every day", timezone="UTC"), NOW)


# --- DST and month ends -----------------------------------------------------------------


def test_cron_on_spring_forward_runs_after_the_gap() -> None:
    # 2025-03-30 in Paris: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist.
    cadence = make_cron("30 2 * * *", "Europe/Paris")
    first = first_run(cadence, utc(2025, 3, 29, 0, 0))
    assert first == utc(2025, 3, 29, 1, 30)
    assert chain(cadence, first, 3) == [
        utc(2025, 3, 29, 1, 30),  # 02:30 CET
        utc(2025, 3, 30, 1, 0),  # 03:00 CEST, the first instant after the gap
        utc(2025, 3, 31, 0, 30),  # 02:30 CEST
    ]


def test_cron_at_a_fixed_hour_runs_once_when_that_hour_happens_twice() -> None:
    # 2025-10-26 in Paris: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice; a daily
    # job runs at the first one only, as classic cron does.
    cadence = make_cron("30 2 * * *", "Europe/Paris")
    first = first_run(cadence, utc(2025, 10, 25, 0, 0))
    assert first == utc(2025, 10, 25, 0, 30)
    assert chain(cadence, first, 3) == [
        utc(2025, 10, 25, 0, 30),
        utc(2025, 10, 26, 0, 30),  # 02:30 CEST; 02:30 CET an hour later is the same time again
        utc(2025, 10, 27, 1, 30),
    ]
    # Seen from inside the repeated hour, the second 02:30 is not a run either.
    assert first_run(cadence, utc(2025, 10, 26, 1, 10)) == utc(2025, 10, 27, 1, 30)


def test_frequent_cron_through_fall_back_keeps_real_time_spacing() -> None:
    cadence = make_cron("*/30 * * * *", "Europe/Paris")
    times = chain(cadence, utc(2025, 10, 25, 23, 30), 8)
    assert [later - earlier for earlier, later in pairwise(times)] == [timedelta(minutes=30)] * 7


@pytest.mark.parametrize(
    ("expression", "zone", "day"),
    [
        ("30 2 * * *", "Europe/Paris", utc(2025, 3, 29, 12)),
        ("30 2 * * *", "Europe/Paris", utc(2025, 10, 25, 12)),
        ("*/15 * * * *", "Europe/Paris", utc(2025, 10, 25, 12)),
        ("0 1-3 * * *", "America/New_York", utc(2025, 3, 8, 12)),
        ("0 1-3 * * *", "America/New_York", utc(2025, 11, 1, 12)),
        ("*/10 2 * * *", "Australia/Lord_Howe", utc(2025, 4, 5, 0)),
    ],
)
def test_cron_around_dst_is_strictly_increasing_and_consistent(
    expression: str, zone: str, day: datetime
) -> None:
    """first_run from any instant agrees with the next_after chain, which never repeats."""
    cadence = make_cron(expression, zone)
    first = first_run(cadence, day)
    assert first is not None
    times = [first]
    while times[-1] < day + timedelta(days=2):
        following = next_after(cadence, times[-1])
        assert following is not None
        times.append(following)
    assert all(earlier < later for earlier, later in pairwise(times))
    now = day
    while now < day + timedelta(days=1, hours=12):
        assert first_run(cadence, now) == times[bisect.bisect_right(times, now)]
        now += timedelta(minutes=5)


def test_cron_on_the_31st_skips_shorter_months() -> None:
    cadence = make_cron("0 9 31 * *", "UTC")
    assert chain(cadence, utc(2025, 1, 31, 9, 0), 7) == [
        utc(2025, 1, 31, 9, 0),
        utc(2025, 3, 31, 9, 0),
        utc(2025, 5, 31, 9, 0),
        utc(2025, 7, 31, 9, 0),
        utc(2025, 8, 31, 9, 0),
        utc(2025, 10, 31, 9, 0),
        utc(2025, 12, 31, 9, 0),
    ]


def test_cron_on_29_february_lands_on_leap_years_only() -> None:
    cadence = make_cron("0 0 29 2 *", "UTC")
    assert first_run(cadence, utc(2025, 1, 1)) == utc(2028, 2, 29)
    assert next_after(cadence, utc(2028, 2, 29)) == utc(2032, 2, 29)
    # 2100 is not a leap year.
    assert first_run(cadence, utc(2096, 3, 1)) == utc(2104, 2, 29)


def test_cron_on_weekdays_skips_the_weekend() -> None:
    cadence = make_cron("0 9 * * 1-5", "Europe/Paris")
    # Friday 6 June 2025, 09:00 CEST, then Monday.
    assert next_after(cadence, utc(2025, 6, 6, 7, 0)) == utc(2025, 6, 9, 7, 0)
    assert first_run(cadence, utc(2025, 6, 7, 12, 0)) == utc(2025, 6, 9, 7, 0)


# --- plan -------------------------------------------------------------------------------

EVERY_5_MIN = IntervalCadence(seconds=300, start=utc(2025, 1, 1, 9, 0))
HOURLY = IntervalCadence(seconds=3_600, start=utc(2025, 1, 1, 8, 0))


def test_plan_leaves_a_schedule_that_is_not_due_alone() -> None:
    due = utc(2025, 1, 1, 9, 5)
    assert plan(schedule(EVERY_5_MIN, due), utc(2025, 1, 1, 9, 4)) == Plan(None, due, 0)
    assert plan(schedule(EVERY_5_MIN, None), utc(2025, 1, 1, 9, 4)) == Plan(None, None, 0)


def test_plan_on_time_fires_the_due_occurrence() -> None:
    result = plan(schedule(EVERY_5_MIN, utc(2025, 1, 1, 9, 5)), utc(2025, 1, 1, 9, 5, 1))
    assert result == Plan(fire=utc(2025, 1, 1, 9, 5), next_run_at=utc(2025, 1, 1, 9, 10))
    assert result.skipped == 0


@pytest.mark.parametrize("misfire", ["skip", "run_once"])
def test_plan_late_within_tolerance_still_fires(misfire: str) -> None:
    due = utc(2025, 1, 1, 9, 5)
    result = plan(schedule(EVERY_5_MIN, due, misfire=misfire), due + LATE_TOLERANCE)
    assert result == Plan(fire=due, next_run_at=utc(2025, 1, 1, 9, 10), skipped=0)


def test_plan_skip_drops_a_run_later_than_the_tolerance() -> None:
    due = utc(2025, 1, 1, 9, 5)
    late = due + LATE_TOLERANCE + timedelta(microseconds=1)
    assert plan(schedule(EVERY_5_MIN, due), late) == Plan(
        fire=None, next_run_at=utc(2025, 1, 1, 9, 10), skipped=1
    )


def test_plan_skip_after_several_missed_runs_goes_to_the_next_after_now() -> None:
    # 09:05, 09:10 and 09:15 were all missed.
    result = plan(schedule(EVERY_5_MIN, utc(2025, 1, 1, 9, 5)), utc(2025, 1, 1, 9, 17))
    assert result == Plan(fire=None, next_run_at=utc(2025, 1, 1, 9, 20), skipped=3)


def test_plan_skip_fires_the_due_run_and_skips_the_rest_of_a_dense_interval() -> None:
    every_30s = IntervalCadence(seconds=30, start=utc(2025, 1, 1, 8, 59, 30))
    result = plan(schedule(every_30s, utc(2025, 1, 1, 9, 0)), utc(2025, 1, 1, 9, 0, 45))
    assert result == Plan(fire=utc(2025, 1, 1, 9, 0), next_run_at=utc(2025, 1, 1, 9, 1), skipped=1)


def test_plan_run_once_within_grace_fires_once() -> None:
    due = utc(2025, 1, 1, 9, 0)
    result = plan(schedule(HOURLY, due, misfire="run_once"), utc(2025, 1, 1, 9, 4))
    assert result == Plan(fire=due, next_run_at=utc(2025, 1, 1, 10, 0), skipped=0)
    at_the_edge = plan(schedule(HOURLY, due, misfire="run_once"), utc(2025, 1, 1, 9, 5))
    assert at_the_edge.fire == due


def test_plan_run_once_beyond_grace_skips() -> None:
    due = utc(2025, 1, 1, 9, 0)
    result = plan(schedule(HOURLY, due, misfire="run_once"), utc(2025, 1, 1, 9, 5, 1))
    assert result == Plan(fire=None, next_run_at=utc(2025, 1, 1, 10, 0), skipped=1)


def test_plan_run_once_grace_never_shrinks_below_the_tolerance() -> None:
    due = utc(2025, 1, 1, 9, 0)
    result = plan(
        schedule(HOURLY, due, misfire="run_once", grace_seconds=0), utc(2025, 1, 1, 9, 0, 30)
    )
    assert result.fire == due


def test_plan_run_once_coalesces_missed_runs_into_the_newest() -> None:
    # Down from before 09:00 on 1 January to 09:02 on 8 January: eight daily runs missed,
    # the newest only two minutes ago.
    daily = make_cron("0 9 * * *", "UTC")
    due, now = utc(2025, 1, 1, 9, 0), utc(2025, 1, 8, 9, 2)
    assert plan(schedule(daily, due, misfire="run_once"), now) == Plan(
        fire=utc(2025, 1, 8, 9, 0), next_run_at=utc(2025, 1, 9, 9, 0), skipped=7
    )
    assert plan(schedule(daily, due), now) == Plan(
        fire=None, next_run_at=utc(2025, 1, 9, 9, 0), skipped=8
    )
    # Back at 11:00 instead: even the newest is two hours late.
    assert plan(schedule(daily, due, misfire="run_once"), utc(2025, 1, 8, 11, 0)) == Plan(
        fire=None, next_run_at=utc(2025, 1, 9, 9, 0), skipped=8
    )


def test_plan_counts_skipped_cron_runs_exactly() -> None:
    cadence = make_cron("*/5 * * * *", "UTC")
    # 09:00 .. 09:55 missed, the newest 10 minutes ago.
    result = plan(schedule(cadence, utc(2025, 1, 1, 9, 0)), utc(2025, 1, 1, 10, 5))
    assert result == Plan(fire=None, next_run_at=utc(2025, 1, 1, 10, 10), skipped=14)


@pytest.mark.parametrize("misfire", ["skip", "run_once"])
def test_plan_once_fires_on_time_then_has_nothing_next(misfire: str) -> None:
    at = utc(2025, 1, 1, 9, 0)
    result = plan(schedule(OnceCadence(at=at), at, misfire=misfire), at + timedelta(seconds=2))
    assert result == Plan(fire=at, next_run_at=None, skipped=0)


def test_plan_once_late_is_skipped_or_run_by_policy() -> None:
    at = utc(2025, 1, 1, 9, 0)
    once = OnceCadence(at=at)
    four_minutes_late = at + timedelta(minutes=4)
    assert plan(schedule(once, at), four_minutes_late) == Plan(None, None, 1)
    assert plan(schedule(once, at, misfire="run_once"), four_minutes_late) == Plan(at, None, 0)
    assert plan(schedule(once, at, misfire="run_once"), at + timedelta(hours=1)) == Plan(
        None, None, 1
    )


def test_plan_works_in_utc_whatever_zone_the_times_come_in() -> None:
    # Same tzinfo on both sides of a DST change: wall-clock subtraction would be an hour off.
    hourly = IntervalCadence(seconds=3_600, start=datetime(2025, 3, 30, 0, 0, tzinfo=PARIS))
    due = datetime(2025, 3, 30, 3, 0, tzinfo=PARIS)  # 01:00 UTC, two hours after start
    now = datetime(2025, 3, 30, 3, 0, 30, tzinfo=PARIS)
    result = plan(schedule(hourly, due), now)
    assert result == Plan(fire=utc(2025, 3, 30, 1, 0), next_run_at=utc(2025, 3, 30, 2, 0))
    assert result.fire is not None and result.fire.tzinfo is UTC


# --- long outages -----------------------------------------------------------------------

MINUTELY = IntervalCadence(seconds=60, start=utc(2025, 1, 1, 0, 0))
OUTAGE_DUE = utc(2025, 1, 1, 0, 1)
# A week later, 30 seconds after a minute boundary.
OUTAGE_NOW = utc(2025, 1, 8, 0, 1, 30)
MISSED_IN_A_WEEK = 7 * 1_440 + 1


def test_a_week_down_runs_exactly_once_under_run_once() -> None:
    result = plan(schedule(MINUTELY, OUTAGE_DUE, misfire="run_once"), OUTAGE_NOW)
    assert result == Plan(
        fire=utc(2025, 1, 8, 0, 1),
        next_run_at=utc(2025, 1, 8, 0, 2),
        skipped=MISSED_IN_A_WEEK - 1,
    )


def test_a_week_down_runs_nothing_under_skip() -> None:
    result = plan(schedule(MINUTELY, OUTAGE_DUE), OUTAGE_NOW)
    assert result == Plan(fire=None, next_run_at=utc(2025, 1, 8, 0, 2), skipped=MISSED_IN_A_WEEK)


@pytest.mark.parametrize("misfire", ["skip", "run_once"])
def test_after_an_outage_replanning_never_bursts(misfire: str) -> None:
    first = plan(schedule(MINUTELY, OUTAGE_DUE, misfire=misfire), OUTAGE_NOW)
    assert first.next_run_at is not None and first.next_run_at > OUTAGE_NOW
    for tick in range(30):
        again = plan(
            schedule(MINUTELY, first.next_run_at, misfire=misfire),
            OUTAGE_NOW + timedelta(seconds=tick),
        )
        assert again == Plan(None, first.next_run_at, 0)


def test_a_week_down_on_a_minutely_cron_runs_once_and_caps_the_count() -> None:
    cadence = make_cron("* * * * *", "UTC")
    run_once = plan(schedule(cadence, OUTAGE_DUE, misfire="run_once"), OUTAGE_NOW)
    assert run_once == Plan(
        fire=utc(2025, 1, 8, 0, 1),
        next_run_at=utc(2025, 1, 8, 0, 2),
        skipped=CRON_COUNT_LIMIT - 1,
    )
    skip = plan(schedule(cadence, OUTAGE_DUE), OUTAGE_NOW)
    assert skip == Plan(fire=None, next_run_at=utc(2025, 1, 8, 0, 2), skipped=CRON_COUNT_LIMIT)


@pytest.mark.parametrize(
    ("expression", "misfire"),
    [
        ("*/30 * * * *", "skip"),
        ("30 2 * * *", "skip"),
        ("*/30 * * * *", "run_once"),
    ],
)
def test_a_ticking_scheduler_fires_every_occurrence_once_through_dst(
    expression: str, misfire: str
) -> None:
    """Tick a few seconds after each due time across both 2025 Paris DST changes."""
    cadence = make_cron(expression, "Europe/Paris")
    for start in (utc(2025, 3, 29, 12), utc(2025, 10, 25, 12)):
        due = first_run(cadence, start)
        assert due is not None
        expected = chain(cadence, due, 5 if expression.startswith("30") else 100)
        fired: list[datetime] = []
        while len(fired) < len(expected):
            assert due is not None
            now = due + timedelta(seconds=7)
            result = plan(schedule(cadence, due, misfire=misfire), now)
            assert result.skipped == 0
            assert result.next_run_at is not None and result.next_run_at > now
            assert result.fire is not None
            fired.append(result.fire)
            due = result.next_run_at
        assert fired == expected
