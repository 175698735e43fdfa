"""`ScheduleBook`: creating, pausing and removing schedules, and the outcome of each run.

The book is the one owner of a schedule's lifecycle and of its run records: the scheduler
asks it to move a schedule past a due occurrence (`advance`, `abandon`), the worker reports a
run's outcome (`finish`) and the receipt desk what became of its answer (`record_delivery`).
Nothing else writes a `ScheduleRun` or changes a schedule's status or failure count.

The outcome rules live here: a success resets the failure count and completes a `once`
schedule; a failed run and an answer that never reached its chat both count as a failure; the
target chat is told after `notify_after` failures in a row (whatever the notification
policy), and the schedule is disabled after `disable_after`. Run history is pruned to the
newest `keep_runs` per schedule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from core.clock import Clock, utc_now
from core.envelopes import Address, new_id
from core.errors import StoreError
from core.scheduling.cadence import CadenceError, first_run, plan
from core.scheduling.misses import default_misfire, late_note, missed_run, zone_of
from core.scheduling.models import (
    Cadence,
    DeliveryState,
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

    async def advance(self, schedule: Schedule, now: datetime) -> ScheduleRun | None:
        """Move `schedule` past its due occurrence as its misfire policy decides (`plan`).

        Occurrences skipped are recorded as one `missed` run; a one-off missed beyond its grace
        is disabled. Returns the run started for the occurrence that fires (saved as
        `running`), or None when none fires now.
        """
        decision = plan(schedule, now)
        update: dict[str, object] = {"next_run_at": decision.next_run_at, "updated_at": now}
        missed = missed_run(schedule, decision, now)
        if decision.fire is None and decision.next_run_at is None:
            # A one-off missed beyond its grace: it never ran.
            update["status"] = "disabled"
            update["status_reason"] = f"its run was missed: {missed.error}" if missed else ""
        await self.store.save_schedule(schedule.model_copy(update=update))
        if missed is not None:
            log.info("schedule %s: %s", schedule.id, missed.error)
            await self.store.save_run(missed)
        if decision.fire is None:
            return None
        run = ScheduleRun(
            id=new_id()[:12], schedule_id=schedule.id, due_at=decision.fire, started_at=now
        )
        await self.store.save_run(run)
        return run

    async def abandon(self, schedule: Schedule, now: datetime) -> None:
        """Move on from an occurrence whose scheduler died before moving the schedule on: to
        the next occurrence after `now`, or, with none left, disable it (its run was lost)."""
        following = None if schedule.cadence.kind == "once" else first_run(schedule.cadence, now)
        moved: dict[str, object] = {"next_run_at": following, "updated_at": now}
        if following is None:
            # Its only (or last) run was lost with the claim.
            moved["status"] = "disabled"
            moved["status_reason"] = "its run was lost: the scheduler firing it stopped"
        await self.store.save_schedule(schedule.model_copy(update=moved))

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
        if succeeded:
            status: ScheduleStatus = (
                "completed" if schedule.cadence.kind == "once" else (schedule.status)
            )
            await self.store.save_schedule(
                schedule.model_copy(
                    update={"consecutive_failures": 0, "status": status, "updated_at": now}
                )
            )
        else:
            alert = await self._count_failure(
                schedule, error=error or "unknown", undelivered=False, at=now
            )
            notes.extend([alert] if alert else [])
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

    async def record_delivery(
        self,
        schedule_id: str,
        run_id: str,
        *,
        state: DeliveryState,
        detail: str,
        at: datetime,
    ) -> Notification | None:
        """Record what became of a run's answer (a gateway's receipt made at `at`).

        An answer that failed or was dead-lettered counts as a failure of the schedule, as a
        failed run does. Returns the failure alert to send to the target chat, if one is due.
        """
        run = await self.store.record_delivery(
            schedule_id, run_id, state=state, detail=detail, at=at
        )
        if run is None:
            log.info("receipt for run %s of schedule %s: no such run", run_id, schedule_id)
            return None
        if state == "delivered":
            return None
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None:
            return None
        why = detail or state.replace("_", " ")
        return await self._count_failure(schedule, error=why, undelivered=True, at=at)

    async def _count_failure(
        self, schedule: Schedule, *, error: str, undelivered: bool, at: datetime
    ) -> Notification | None:
        """The one failure rule, for a failed run and for an answer that never reached its
        chat alike: count it; alert the target chat at `notify_after` failures in a row and
        disable the schedule at `disable_after`. Returns the alert, when one is due."""
        failures = schedule.consecutive_failures + 1
        if undelivered:
            # A schedule paused or completed while its answer was on the way stays so.
            disables = failures >= self.disable_after and schedule.status == "active"
            happened = f"could not be delivered or run {failures} times in a row"
            reason = f"{failures} runs in a row failed or could not be delivered; last: {error}"
        else:
            # A one-off that failed has no other run to come: it is disabled at once.
            disables = failures >= self.disable_after or schedule.cadence.kind == "once"
            happened = f"failed {failures} {'time(s)' if disables else 'times'} in a row"
            runs = "its run" if failures == 1 else f"{failures} runs in a row"
            reason = f"{runs} failed; last error: {error}"
        alert = None
        if disables:
            alert = f"Scheduled task {schedule.id} {happened} and is now disabled"
        elif failures == self.notify_after:
            alert = f"Scheduled task {schedule.id} {happened}"
        await self.store.save_schedule(
            schedule.model_copy(
                update={
                    "consecutive_failures": failures,
                    "status": "disabled" if disables else schedule.status,
                    "status_reason": reason if disables else schedule.status_reason,
                    "updated_at": at,
                }
            )
        )
        if alert is None:
            return None
        return Notification(schedule.deliver_to, f"{alert}. Last error: {error}", kind="alert")

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
