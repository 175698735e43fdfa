"""`Scheduler`: turns due schedules into inbound work, once per occurrence.

Every tick it asks the store for due schedules, decides with `plan` (the misfire policy: a
process that was down fires at most once, never a burst), claims the occurrence with a
processed mark (so with several schedulers exactly one fires it), advances `next_run_at`, and
puts an `Inbound(origin="scheduled")` on the bus. Workers run it in the session
`scheduled:<id>` and deliver the answer per the schedule's policy.

A scheduler fires only the schedules of the platforms it was given: those its process can
deliver to. `switchboard chat` fires `terminal` schedules (its answers are shown there and
nowhere else); `serve` and `switchboard scheduler` the chat platforms. Any other schedule is
left due, untouched, for the scheduler of a process that can deliver it.

A tick that fails because the store or the bus is away (Redis restarting) is tried again with
backoff until it succeeds; meanwhile the scheduler is marked down in the process's `Readiness`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Protocol

from core.bus.base import Bus
from core.bus.names import INBOUND
from core.clock import Clock, utc_now
from core.envelopes import Inbound, new_id
from core.errors import BusError, StoreError
from core.readiness import Readiness, keep_trying
from core.scheduling.cadence import first_run, plan
from core.scheduling.misses import missed_run
from core.scheduling.models import Schedule, ScheduleRun
from core.store.processed import ProcessedMarks
from core.store.schedules import ScheduleStore

__all__ = ["Scheduler", "SchedulerStore"]

log = logging.getLogger(__name__)

# An occurrence claimed by a scheduler that died before moving the schedule on is taken up
# again after this long, so a schedule is never stuck behind a dead claim.
_ABANDONED_CLAIM = timedelta(minutes=2)
# Due schedules read per tick. Larger than any one process fires in a tick, so schedules left
# for other processes' platforms do not crowd out this one's.
_DUE_BATCH = 1000


class SchedulerStore(ScheduleStore, ProcessedMarks, Protocol):
    """What the scheduler keeps: the schedules, and marks so one occurrence fires once."""


class Scheduler:
    """Fires due schedules; run one or several (they never fire an occurrence twice)."""

    def __init__(
        self,
        *,
        store: SchedulerStore,
        bus: Bus,
        readiness: Readiness,
        clock: Clock = utc_now,
        tick: float = 1.0,
        platforms: Collection[str] | None = None,
    ) -> None:
        """`platforms`: fire only schedules delivering to these (None: every platform)."""
        self.store = store
        self.platforms = frozenset(platforms) if platforms is not None else None
        self.bus = bus
        self.readiness = readiness
        self._clock = clock
        self._tick = tick
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Tick until `stop()`."""
        log.info("scheduler running")
        while not self._stopping.is_set():
            try:
                await keep_trying(
                    self.readiness, "scheduler", self.tick_once, stopping=self._stopping
                )
            except (StoreError, BusError):
                break  # stop() was asked while the store or the bus was away
            try:
                await asyncio.wait_for(self._stopping.wait(), self._tick)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Stop after the current tick."""
        self._stopping.set()

    async def tick_once(self) -> int:
        """Fire what is due now; returns how many runs were started."""
        now = self._clock()
        fired = 0
        for schedule in await self.store.due_schedules(now, limit=_DUE_BATCH):
            if not self.fires(schedule):
                continue  # left due for a process that can deliver there
            if await self._advance(schedule, now):
                fired += 1
        return fired

    def fires(self, schedule: Schedule) -> bool:
        """Whether this scheduler fires `schedule` (its process delivers to its platform)."""
        return self.platforms is None or schedule.deliver_to.platform in self.platforms

    async def _advance(self, schedule: Schedule, now: datetime) -> bool:
        assert schedule.next_run_at is not None
        occurrence = schedule.next_run_at
        current = now
        claimed = await self.store.mark_processed(
            f"schedule:{schedule.id}:{occurrence.isoformat()}"
        )
        if not claimed:
            if current - occurrence < _ABANDONED_CLAIM:
                return False  # another scheduler is on it
            log.warning(
                "schedule %s: the scheduler that claimed %s died; moving on",
                schedule.id,
                occurrence,
            )
            following = (
                None if schedule.cadence.kind == "once" else first_run(schedule.cadence, current)
            )
            moved: dict[str, object] = {"next_run_at": following, "updated_at": current}
            if following is None:
                # Its only (or last) run was lost with the claim.
                moved["status"] = "disabled"
                moved["status_reason"] = "its run was lost: the scheduler firing it stopped"
            await self.store.save_schedule(schedule.model_copy(update=moved))
            return False
        decision = plan(schedule, current)
        update: dict[str, object] = {"next_run_at": decision.next_run_at, "updated_at": current}
        missed = missed_run(schedule, decision, current)
        if decision.fire is None and decision.next_run_at is None:
            # A one-off missed beyond its grace: it never ran.
            update["status"] = "disabled"
            update["status_reason"] = f"its run was missed: {missed.error}" if missed else ""
        await self.store.save_schedule(schedule.model_copy(update=update))
        if missed is not None:
            log.info("schedule %s: %s", schedule.id, missed.error)
            await self.store.save_run(missed)
        if decision.fire is None:
            return False
        run = ScheduleRun(
            id=new_id()[:12], schedule_id=schedule.id, due_at=decision.fire, started_at=current
        )
        await self.store.save_run(run)
        await self.bus.enqueue(
            INBOUND,
            Inbound(
                origin="scheduled",
                address=schedule.deliver_to,
                text=schedule.prompt,
                owner=schedule.owner,
                is_direct=True,
                schedule_id=schedule.id,
                run_id=run.id,
                notify=schedule.notify,
            ),
        )
        log.info("schedule %s fired (run %s)", schedule.id, run.id)
        return True
