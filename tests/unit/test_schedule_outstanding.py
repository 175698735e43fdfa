"""`is_outstanding`: what a closing chat still waits for. Fixed datetimes only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.envelopes import Address
from core.scheduling.models import DeliveryState, OnceCadence, RunStatus, Schedule, ScheduleRun
from core.scheduling.outstanding import is_outstanding

OPENED = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
NOW = OPENED + timedelta(seconds=5)
TERMINAL = Address(platform="terminal", bot="local", chat="any")


def schedule(next_run_at: datetime | None, status: str = "active") -> Schedule:
    return Schedule.model_validate(
        {
            "id": "s1",
            "cadence": OnceCadence(at=OPENED - timedelta(minutes=3)),
            "prompt": "Take the bread out",
            "deliver_to": TERMINAL,
            "owner": "cli",
            "status": status,
            "next_run_at": next_run_at,
            "created_at": OPENED - timedelta(hours=1),
            "updated_at": OPENED - timedelta(hours=1),
        }
    )


def run(started: datetime, status: RunStatus, delivery: DeliveryState) -> ScheduleRun:
    return ScheduleRun(
        id=f"r{started:%H%M%S}",
        schedule_id="s1",
        due_at=OPENED - timedelta(minutes=3),
        started_at=started,
        status=status,
        delivery=delivery,
    )


def test_a_due_schedule_not_fired_yet_is_waited_for() -> None:
    assert is_outstanding(schedule(OPENED - timedelta(minutes=3)), [], since=OPENED, now=NOW)


@pytest.mark.parametrize("status", ["paused", "disabled", "completed"])
def test_a_schedule_that_will_not_fire_is_not_waited_for(status: str) -> None:
    due = schedule(OPENED - timedelta(minutes=3), status=status)
    assert not is_outstanding(due, [], since=OPENED, now=NOW)


def test_a_schedule_due_only_after_now_is_not_waited_for() -> None:
    assert not is_outstanding(schedule(NOW + timedelta(seconds=1)), [], since=OPENED, now=NOW)


@pytest.mark.parametrize(
    ("status", "delivery", "waited"),
    [
        ("running", "none", True),
        ("succeeded", "pending", True),
        ("succeeded", "delivered", False),
        ("succeeded", "none", False),  # the policy kept it quiet
        ("failed", "none", False),
        ("succeeded", "failed", False),
    ],
)
def test_a_run_this_chat_fired_is_waited_for_until_its_answer_is_delivered(
    status: RunStatus, delivery: DeliveryState, waited: bool
) -> None:
    fired = [run(OPENED + timedelta(seconds=1), status, delivery)]
    assert is_outstanding(schedule(None), fired, since=OPENED, now=NOW) is waited


def test_a_run_fired_before_this_chat_opened_is_not_waited_for() -> None:
    # Left `pending` by a chat that was killed: nobody will ever deliver it.
    earlier = [run(OPENED - timedelta(seconds=1), "succeeded", "pending")]
    assert not is_outstanding(schedule(None), earlier, since=OPENED, now=NOW)
