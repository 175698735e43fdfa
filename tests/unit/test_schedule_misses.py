"""Late and missed runs: the default misfire policy, the note on a late answer, the record of
runs that never happened. Pure functions, fixed datetimes only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.envelopes import Address
from core.scheduling.cadence import Plan, make_cron
from core.scheduling.misses import default_misfire, late_note, missed_run, span
from core.scheduling.models import IntervalCadence, OnceCadence, Schedule

DUE = datetime(2026, 11, 27, 17, 30, tzinfo=UTC)


def schedule(next_run_at: datetime, **fields: object) -> Schedule:
    return Schedule.model_validate(
        {
            "id": "s1",
            "cadence": OnceCadence(at=next_run_at),
            "prompt": "Take the bread out",
            "deliver_to": Address(platform="terminal", bot="local", chat="any"),
            "owner": "cli",
            "next_run_at": next_run_at,
            "created_at": next_run_at - timedelta(hours=1),
            "updated_at": next_run_at - timedelta(hours=1),
            **fields,
        }
    )


def test_one_offs_run_late_within_a_day_repeating_ones_skip() -> None:
    assert default_misfire(OnceCadence(at=DUE)) == ("run_once", 86_400)
    assert default_misfire(IntervalCadence(seconds=60, start=DUE)) == ("skip", 300)
    assert default_misfire(make_cron("0 9 * * *"), "run_once") == ("run_once", 300)
    assert default_misfire(OnceCadence(at=DUE), "skip") == ("skip", 86_400)


@pytest.mark.parametrize(
    ("started", "now", "zone", "note"),
    [
        # On time (within the scheduler's minute of tolerance): no note.
        (DUE, DUE + timedelta(seconds=20), "UTC", None),
        (DUE + timedelta(seconds=60), DUE + timedelta(minutes=2), "UTC", None),
        (
            DUE + timedelta(minutes=12),
            DUE + timedelta(minutes=12, seconds=5),
            "UTC",
            "(due at 17:30 UTC, 12 minutes ago)",
        ),
        (
            DUE + timedelta(minutes=3),
            DUE + timedelta(minutes=3),
            "Europe/Paris",
            "(due at 18:30 Europe/Paris, 3 minutes ago)",
        ),
        # Due on another day than today (in the zone): the day is said too.
        (
            DUE + timedelta(hours=9),
            DUE + timedelta(hours=9),
            "UTC",
            "(due at 17:30 UTC on Fri 27 Nov, 9 hours ago)",
        ),
        # A zone that no longer exists: said in UTC.
        (
            DUE + timedelta(minutes=5),
            DUE + timedelta(minutes=5),
            "Mars/Base",
            "(due at 17:30 UTC, 5 minutes ago)",
        ),
    ],
)
def test_a_late_answer_says_when_it_was_due(
    started: datetime, now: datetime, zone: str, note: str | None
) -> None:
    assert late_note(due_at=DUE, started_at=started, now=now, zone=zone) == note


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (89, "89 seconds"),
        (90, "1 minute"),
        (720, "12 minutes"),
        (5_399, "89 minutes"),
        (5_400, "1 hour"),
        (86_400, "24 hours"),
        (172_800, "2 days"),
    ],
)
def test_span_says_a_length_of_time_as_people_do(seconds: int, said: str) -> None:
    assert span(timedelta(seconds=seconds)) == said


def test_a_one_off_missed_past_its_grace_is_recorded_with_why() -> None:
    late = schedule(DUE, misfire="run_once", grace_seconds=86_400)
    now = DUE + timedelta(hours=30)
    missed = missed_run(late, Plan(fire=None, next_run_at=None, skipped=1), now)
    assert missed is not None
    assert (missed.status, missed.due_at, missed.started_at, missed.finished_at) == (
        "missed",
        DUE,
        now,
        now,
    )
    assert missed.error == "due 2026-11-27 17:30 UTC; 30 hours late, past the 24 hours grace"
    assert missed.delivery == "none"


def test_nothing_skipped_is_no_record() -> None:
    on_time = schedule(DUE)
    assert missed_run(on_time, Plan(fire=DUE, next_run_at=None, skipped=0), DUE) is None
