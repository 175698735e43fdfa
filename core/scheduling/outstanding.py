"""Answers still owed to a chat that is about to close: schedules due but not yet fired, and
runs fired but not yet answered and delivered.

A piped `switchboard chat` reads its input to the end and would leave at once; a reminder due
by then would fire and never be shown (its run `pending` for good). The chat waits, bounded,
until nothing is outstanding (`bots/commands/chat.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.scheduling.models import Schedule, ScheduleRun
from core.store.schedules import ScheduleStore

__all__ = ["is_outstanding", "outstanding"]

# Runs of one schedule looked at: the newest few are the ones this chat may have fired.
_RECENT_RUNS = 5


def is_outstanding(
    schedule: Schedule, runs: Sequence[ScheduleRun], *, since: datetime, now: datetime
) -> bool:
    """Whether `schedule` still owes an answer due by `now`: it is active and due (about to
    fire), or a run of it started since `since` (this chat fired it) is still running or its
    answer has no receipt yet. `runs` newest first."""
    if schedule.status == "active" and schedule.next_run_at is not None:
        if schedule.next_run_at <= now:
            return True
    for run in runs:
        if run.started_at < since:
            return False  # fired before this chat: not this chat's to wait for
        if run.due_at <= now and (run.status == "running" or run.delivery == "pending"):
            return True
    return False


async def outstanding(
    store: ScheduleStore, *, platform: str, since: datetime, now: datetime
) -> list[str]:
    """The ids of the schedules delivering to `platform` that still owe an answer due by
    `now` (see `is_outstanding`)."""
    owing = []
    for schedule in await store.list_schedules():
        if schedule.deliver_to.platform != platform:
            continue
        runs = await store.list_runs(schedule.id, limit=_RECENT_RUNS)
        if is_outstanding(schedule, runs, since=since, now=now):
            owing.append(schedule.id)
    return owing
