"""`ScheduleBook`: creating, pausing and removing schedules, and the outcome of each run.

The outcome rules live here: a success resets the failure count and completes a `once`
schedule; failures are counted, the target chat is told after `notify_after` of them in a row
(whatever the notification policy), and the schedule is disabled after `disable_after`. Run
history is pruned to the newest `keep_runs` per schedule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from core.clock import Clock, utc_now
from core.envelopes import Address, new_id
from core.errors import StoreError
from core.scheduling.cadence import CadenceError, first_run
from core.scheduling.misses import default_misfire, late_note, zone_of
from core.scheduling.models import (
    Cadence,
    Misfire,
    NotifyPolicy,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
)
from core.scheduling.rules import ScheduleLimits
from core.store.schedules import ScheduleStore

__all__ = ["NOTIFY_MARKER", "Notification", "ScheduleBook", "deliverable"]

log = logging.getLogger(__name__)

# A `conditional` schedule's answer is delivered only when it starts with this marker.
NOTIFY_MARKER = "[NOTIFY]"


@dataclass(frozen=True)
class Notification:
    """Something to show in a schedule's target chat."""

    address: Address
    text: str
    # `answer`: the run's output; `alert`: a failure alert (its receipt counts no failure).
    kind: Literal["answer", "alert"] = "answer"


class ScheduleBook:
    """Schedules as the store keeps them, with the rules of their lifecycle."""

    def __init__(
        self,
        store: ScheduleStore,
        *,
        clock: Clock = utc_now,
        notify_after: int = 3,
        disable_after: int = 5,
        keep_runs: int = 50,
        limits: ScheduleLimits | None = None,
    ) -> None:
        self.store = store
        # How often and how many: checked by whatever creates schedules for people.
        self.limits = limits or ScheduleLimits()
        self._clock = clock
        self.notify_after = notify_after
        self.disable_after = disable_after
        self.keep_runs = keep_runs

    async def create(
        self,
        *,
        cadence: Cadence,
        prompt: str,
        deliver_to: Address,
        owner: str,
        notify: NotifyPolicy = "always",
        misfire: Misfire | None = None,
        grace_seconds: int | None = None,
    ) -> Schedule:
        """Validate and store a new active schedule; `CadenceError` if it would never run or
        has nothing to ask.

        Without `misfire` and `grace_seconds`, a one-off runs late within a day and a
        repeating schedule skips what it missed (`core/scheduling/misses.py`).
        """
        if not prompt.strip():
            raise CadenceError("the prompt is empty: say what to ask at each run")
        now = self._clock()
        first = first_run(cadence, now)
        if first is None or first <= now:
            raise CadenceError("that time is already past")
        policy, grace = default_misfire(cadence, misfire)
        schedule = Schedule(
            id=new_id()[:10],
            cadence=cadence,
            prompt=prompt.strip(),
            deliver_to=deliver_to,
            notify=notify,
            owner=owner,
            next_run_at=first,
            misfire=policy,
            grace_seconds=grace if grace_seconds is None else grace_seconds,
            created_at=now,
            updated_at=now,
        )
        await self.store.save_schedule(schedule)
        return schedule

    async def get(self, schedule_id: str) -> Schedule:
        """The schedule; `StoreError` naming the id when there is none."""
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None:
            raise StoreError(f"no schedule {schedule_id!r}")
        return schedule

    async def set_status(
        self, schedule_id: str, status: ScheduleStatus, *, reason: str = ""
    ) -> Schedule:
        """Pause or resume (resuming starts from the next occurrence after now); `reason` says
        why, when it is not the operator's choice.

        Resuming a schedule with no occurrence left after now (a one-off whose time passed)
        raises `CadenceError`.
        """
        schedule = await self.get(schedule_id)
        now = self._clock()
        update: dict[str, object] = {"status": status, "updated_at": now, "status_reason": reason}
        if status == "active":
            upcoming = first_run(schedule.cadence, now)
            # first_run gives a one-off its `at` even when that is past: it would never run.
            if upcoming is None or upcoming <= now:
                raise CadenceError("nothing is left to run: its time is already past")
            update["next_run_at"] = upcoming
            update["consecutive_failures"] = 0
        changed = schedule.model_copy(update=update)
        await self.store.save_schedule(changed)
        return changed

    async def pause_all_of(self, owner: str) -> list[Schedule]:
        """Pause every active schedule `owner` made (someone whose access was taken away must
        not keep spending through them); the schedules paused."""
        paused = []
        for schedule in await self.store.list_schedules(owner=owner):
            if schedule.status == "active":
                paused.append(
                    await self.set_status(
                        schedule.id, "paused", reason="its owner's access was taken away"
                    )
                )
        return paused

    async def finish(
        self,
        schedule_id: str,
        run_id: str,
        *,
        succeeded: bool,
        output: str,
        error: str = "",
        duration_ms: float | None = None,
        cost_usd: float | None = None,
    ) -> list[Notification]:
        """Record a run's outcome; returns what the target chat should be shown."""
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None:
            log.info("schedule %s was removed while it ran", schedule_id)
            return []
        now = self._clock()
        run = await self._run(schedule_id, run_id)
        shown = deliverable(schedule.notify, output) if succeeded else None
        notes = (
            [Notification(schedule.deliver_to, _noted(shown, run, schedule, now))] if shown else []
        )
        reason = schedule.status_reason
        if succeeded:
            failures = 0
            status: ScheduleStatus = (
                "completed" if schedule.cadence.kind == "once" else (schedule.status)
            )
        else:
            failures = schedule.consecutive_failures + 1
            status = schedule.status
            if failures >= self.disable_after or schedule.cadence.kind == "once":
                status = "disabled"
                runs = "its run" if failures == 1 else f"{failures} runs in a row"
                reason = f"{runs} failed; last error: {error or 'unknown'}"
                notes.append(
                    Notification(
                        schedule.deliver_to,
                        f"Scheduled task {schedule.id} failed {failures} time(s) in a row and "
                        f"is now disabled. Last error: {error or 'unknown'}",
                        kind="alert",
                    )
                )
            elif failures == self.notify_after:
                notes.append(
                    Notification(
                        schedule.deliver_to,
                        f"Scheduled task {schedule.id} failed {failures} times in a row. "
                        f"Last error: {error or 'unknown'}",
                        kind="alert",
                    )
                )
        await self.store.save_schedule(
            schedule.model_copy(
                update={
                    "consecutive_failures": failures,
                    "status": status,
                    "status_reason": reason,
                    "updated_at": now,
                }
            )
        )
        if run is not None:
            await self.store.save_run(
                run.model_copy(
                    update={
                        "finished_at": now,
                        "status": "succeeded" if succeeded else "failed",
                        "output": output,
                        "error": error,
                        # Delivered only when the gateway's receipt says so.
                        "delivered": False,
                        "delivery": "pending" if shown else "none",
                        "duration_ms": duration_ms,
                        "cost_usd": cost_usd,
                    }
                )
            )
        await self.store.prune_runs(schedule_id, keep=self.keep_runs)
        return notes

    async def _run(self, schedule_id: str, run_id: str) -> ScheduleRun | None:
        for run in await self.store.list_runs(schedule_id, limit=self.keep_runs):
            if run.id == run_id:
                return run
        return None


def _noted(text: str, run: ScheduleRun | None, schedule: Schedule, now: datetime) -> str:
    """The answer, after a line saying when it was due when the run started late."""
    if run is None:
        return text
    note = late_note(
        due_at=run.due_at, started_at=run.started_at, now=now, zone=zone_of(schedule.cadence)
    )
    return f"{note}\n{text}" if note else text


def deliverable(policy: NotifyPolicy, output: str) -> str | None:
    """The text to deliver under the policy, or None to stay quiet (a schedule's run, or an
    agent turn asked for from outside, `core/notifications/external.py`)."""
    text = output.strip()
    if policy == "never" or not text:
        return None
    if policy == "conditional":
        if not text.startswith(NOTIFY_MARKER):
            return None
        text = text[len(NOTIFY_MARKER) :].strip()
        return text or None
    return text
