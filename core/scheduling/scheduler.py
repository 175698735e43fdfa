"""`Scheduler`: turns due schedules into inbound work, once per occurrence.

Every tick it asks the store for due schedules, claims each occurrence with a processed mark
(so with several schedulers exactly one fires it), has the `ScheduleBook` move the schedule on
(`advance`: the misfire policy, so a process that was down fires at most once, never a burst;
the run record), and puts an `Inbound(origin="scheduled")` in the mailbox of the session
`scheduled:<id>`, where a worker runs it and deliver the answer per the schedule's policy.

A scheduler fires only the schedules of the platforms it was given: those its process can
deliver to. `switchboard chat` fires `terminal` schedules (its answers are shown there and
nowhere else); `serve` and `switchboard scheduler` the chat platforms. Any other schedule is
left due, untouched, for the scheduler of a process that can deliver it.

A tick that fails because the store or the mailboxes are away (Redis restarting) is tried again with
backoff until it succeeds; meanwhile the scheduler is marked down in the process's `Readiness`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Protocol

from core.bus.base import Bus
from core.clock import Clock, utc_now
from core.envelopes import Inbound
from core.errors import BusError, StoreError
from core.mailbox.base import Mailboxes
from core.mailbox.intake import accept_inbound
from core.readiness import Readiness, keep_trying
from core.scheduling.book import ScheduleBook
from core.scheduling.models import Schedule
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
        book: ScheduleBook,
        bus: Bus,
        mailboxes: Mailboxes,
        readiness: Readiness,
        clock: Clock = utc_now,
        tick: float = 1.0,
        platforms: Collection[str] | None = None,
    ) -> None:
        """`platforms`: fire only schedules delivering to these (None: every platform)."""
        self.store = store
        self.book = book
        self.platforms = frozenset(platforms) if platforms is not None else None
        self.bus = bus
        self.mailboxes = mailboxes
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
            await self.book.abandon(schedule, current)
            return False
        run = await self.book.advance(schedule, current)
        if run is None:
            return False
        await accept_inbound(
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
            mailboxes=self.mailboxes,
            bus=self.bus,
        )
        log.info("schedule %s fired (run %s)", schedule.id, run.id)
        return True
