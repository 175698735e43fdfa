"""Who may do what with a schedule, and how many and how often people may schedule.

One rule for every way in (chat tools, chat commands, the CLI): a schedule may be cancelled by
whoever made it (`owner`: "<platform>:<user id>", or "cli" for the operator) or by an admin.
Others in the chat it delivers to see that it exists, not what it asks.

Limits keep one chat user from turning the bot into a load generator: repeating schedules run
at most every `min_interval` seconds (the operator and admins may go down to `FLOOR_SECONDS`),
and a person and a chat hold at most so many active schedules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.envelopes import Address
from core.errors import SwitchboardError
from core.scheduling.cadence import first_run, next_after
from core.scheduling.models import Cadence, OnceCadence, Schedule
from core.store.schedules import ScheduleStore

__all__ = [
    "CLI_OWNER",
    "FLOOR_SECONDS",
    "ScheduleLimits",
    "ScheduleRefused",
    "check_gap",
    "may_manage",
    "shortest_gap",
    "shows_prompt",
]

# The owner of a schedule made with `switchboard schedule add`.
CLI_OWNER = "cli"
# Nobody schedules repeating runs closer than this: each run is a model call.
FLOOR_SECONDS = 10
# Occurrences looked at to find a cron expression's shortest gap (a day of `*/30` and more).
_CRON_SAMPLE = 64


class ScheduleRefused(SwitchboardError, ValueError):
    """A schedule a limit does not allow; the message is one line saying which and why."""


def may_manage(schedule: Schedule, *, requester: str, is_admin: bool) -> bool:
    """Whether `requester` ("<platform>:<user id>" or "cli") may cancel or inspect it."""
    return is_admin or schedule.owner == requester


def shows_prompt(schedule: Schedule, *, requester: str, is_admin: bool) -> bool:
    """Whether a listing for `requester` may include the schedule's prompt (and its runs)."""
    return may_manage(schedule, requester=requester, is_admin=is_admin)


def shortest_gap(cadence: Cadence, now: datetime) -> int | None:
    """The fewest seconds between two runs of a repeating cadence; None for a one-off."""
    if isinstance(cadence, OnceCadence):
        return None
    if cadence.kind == "interval":
        return cadence.seconds
    occurrence = first_run(cadence, now)
    gaps: list[float] = []
    for _ in range(_CRON_SAMPLE):
        if occurrence is None:
            break
        following = next_after(cadence, occurrence)
        if following is None:
            break
        gaps.append((following - occurrence).total_seconds())
        occurrence = following
    return int(min(gaps)) if gaps else None


def check_gap(cadence: Cadence, minimum: int, now: datetime) -> None:
    """Raise `ScheduleRefused` when runs of `cadence` come closer than `minimum` seconds (never
    below `FLOOR_SECONDS`)."""
    minimum = max(FLOOR_SECONDS, minimum)
    gap = shortest_gap(cadence, now)
    if gap is not None and gap < minimum:
        raise ScheduleRefused(
            f"runs would be {_seconds(gap)} apart; the shortest allowed is {_seconds(minimum)}"
        )


@dataclass(frozen=True)
class ScheduleLimits:
    """How often and how many: from the profile (`min_schedule_interval`,
    `max_schedules_per_person`, `max_schedules_per_chat`)."""

    min_interval: int = 300
    max_per_person: int = 20
    max_per_chat: int = 50

    async def admit(
        self,
        store: ScheduleStore,
        *,
        cadence: Cadence,
        owner: str,
        deliver_to: Address,
        is_admin: bool,
        now: datetime,
    ) -> None:
        """Raise `ScheduleRefused` when this new schedule goes past a limit.

        The operator (owner "cli") and admins are held only to `FLOOR_SECONDS`; chat users
        to `min_interval` and to the per-person and per-chat counts of active schedules.
        """
        trusted = is_admin or owner == CLI_OWNER
        check_gap(cadence, FLOOR_SECONDS if trusted else self.min_interval, now)
        if trusted:
            return
        mine = [s for s in await store.list_schedules(owner=owner) if s.status == "active"]
        if len(mine) >= self.max_per_person:
            raise ScheduleRefused(
                f"you already have {len(mine)} active schedules (at most {self.max_per_person}); "
                "cancel one first"
            )
        chat = [
            s for s in await store.list_schedules(deliver_to=deliver_to) if s.status == "active"
        ]
        if len(chat) >= self.max_per_chat:
            raise ScheduleRefused(
                f"this chat already has {len(chat)} active schedules (at most "
                f"{self.max_per_chat}); cancel one first"
            )


def _seconds(seconds: int) -> str:
    for unit, size in (("hours", 3600), ("minutes", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}" if count != 1 else f"1 {unit[:-1]}"
    return f"{seconds} seconds" if seconds != 1 else "1 second"
