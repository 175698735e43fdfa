"""The schedule tools: a person can ask in a chat for something to happen later, there.

A schedule made by a tool is always delivered to the chat it was asked in, owned by the asking
person; listing sees that chat's schedules. That keeps them within `safe-chat`: nobody
schedules into someone else's chat. Only the owner or an admin may cancel one or see its prompt
and runs (`core/scheduling/rules.py`); others in the chat see that it exists.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from core.envelopes import Address
from core.errors import StoreError, ToolError
from core.scheduling.book import ScheduleBook
from core.scheduling.cadence import (
    CadenceError,
    make_cron,
    parse_at,
    parse_duration,
    parse_timezone,
)
from core.scheduling.models import Cadence, IntervalCadence, OnceCadence, Schedule
from core.scheduling.rules import ScheduleRefused, may_manage, shows_prompt
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = ["describe_cadence", "schedule_line", "schedule_tools"]


class ScheduleCreateArgs(BaseModel):
    """Schedule a task in this chat: once (`delay` or `at`) or repeatedly (`every` or `cron`)."""

    prompt: str = Field(
        min_length=1,
        max_length=2000,
        description=(
            "What to do at each run, written as an instruction to yourself, e.g. "
            "'Remind the user to post the standup' or 'What is 2+3?'"
        ),
    )
    delay: str | None = Field(
        default=None, description="Run once after this long: 30s, 10m, 2h, 1d."
    )
    at: str | None = Field(
        default=None,
        description="Run once at this ISO 8601 time, e.g. 2026-05-01T09:00 (read in `timezone`).",
    )
    every: str | None = Field(
        default=None, description="Run repeatedly at this interval: 30s, 5m, 2h, 1d."
    )
    cron: str | None = Field(
        default=None,
        description="Run at the times of a 5-field cron expression, e.g. '0 9 * * 1-5'.",
    )
    timezone: str = Field(default="UTC", description="IANA timezone for `at` and `cron`.")
    notify: Literal["always", "conditional", "never"] = Field(
        default="always",
        description=(
            "always: deliver every answer; conditional: deliver only answers that start with "
            "[NOTIFY] (for checks that usually have nothing to say); never: just record runs."
        ),
    )

    @model_validator(mode="after")
    def _one_cadence(self) -> ScheduleCreateArgs:
        given = [n for n in ("delay", "at", "every", "cron") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of delay, at, every or cron")
        return self


class ScheduleIdArgs(BaseModel):
    """One schedule, by the id shown when it was made or listed."""

    schedule_id: str = Field(min_length=1, max_length=64)


class ScheduleRunOutputArgs(BaseModel):
    """The whole output of one run of a schedule: the latest, or the one named."""

    schedule_id: str = Field(min_length=1, max_length=64)
    run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="A run's id as schedule_runs shows it; the latest run when left out.",
    )


class ScheduleListArgs(BaseModel):
    """The schedules that deliver to this chat."""


def schedule_tools(book: ScheduleBook) -> list[Tool[Any]]:
    """`schedule_create`, `schedule_list`, `schedule_cancel`, `schedule_runs` and
    `schedule_run_output` over a book."""
    tools = _Schedules(book)
    return [
        Tool(
            name="schedule_create",
            description=(
                "Schedule a task whose answer is delivered to this chat later: a reminder, a "
                "recurring question or check. The prompt runs as a message to you at each time."
            ),
            args=ScheduleCreateArgs,
            tier=SafetyTier.SIDE_EFFECTING,
            run=tools.create,
        ),
        Tool(
            name="schedule_list",
            description=(
                "List the schedules that deliver to this chat (prompts only of the asking "
                "person's own, or of all for an admin)."
            ),
            args=ScheduleListArgs,
            tier=SafetyTier.READ_ONLY,
            run=tools.listing,
        ),
        Tool(
            name="schedule_cancel",
            description=(
                "Cancel a schedule of this chat by its id (one the asking person made, or any "
                "when they are an admin)."
            ),
            args=ScheduleIdArgs,
            tier=SafetyTier.SIDE_EFFECTING,
            run=tools.cancel,
        ),
        Tool(
            name="schedule_runs",
            description=(
                "Show the latest runs of a schedule of this chat (one the asking person made, "
                "or any when they are an admin)."
            ),
            args=ScheduleIdArgs,
            tier=SafetyTier.READ_ONLY,
            run=tools.runs,
        ),
        Tool(
            name="schedule_run_output",
            description=(
                "Read the whole output of a run of a schedule of this chat (the latest, or "
                "the run id schedule_runs shows), not only its first lines."
            ),
            args=ScheduleRunOutputArgs,
            tier=SafetyTier.READ_ONLY,
            run=tools.run_output,
        ),
    ]


class _Schedules:
    """What the schedule tools do, over one book."""

    def __init__(self, book: ScheduleBook) -> None:
        self.book = book

    async def create(self, args: ScheduleCreateArgs, context: ToolContext) -> str:
        if context.scheduled:
            raise ToolError("A scheduled task cannot create more schedules.")
        address = _chat(context)
        owner = _requester(context)
        now = context.clock()
        try:
            cadence = _cadence(args, now)
            await self.book.limits.admit(
                self.book.store,
                cadence=cadence,
                owner=owner,
                deliver_to=address,
                is_admin=context.is_admin,
                now=now,
            )
            schedule = await self.book.create(
                cadence=cadence,
                prompt=args.prompt,
                deliver_to=address,
                owner=owner,
                notify=args.notify,
            )
        except (CadenceError, ScheduleRefused) as exc:
            raise ToolError(f"Cannot schedule that: {exc}") from exc
        return (
            f"Scheduled {schedule.id}: {describe_cadence(schedule.cadence)}; next run "
            f"{_when(schedule.next_run_at)}. Answers will come to this chat."
        )

    async def listing(self, _args: ScheduleListArgs, context: ToolContext) -> str:
        schedules = await self.book.store.list_schedules(deliver_to=_chat(context))
        if not schedules:
            return "No schedules deliver to this chat."
        requester, admin = _requester(context), context.is_admin
        return "\n".join(
            schedule_line(s, with_prompt=shows_prompt(s, requester=requester, is_admin=admin))
            for s in schedules
        )

    async def cancel(self, args: ScheduleIdArgs, context: ToolContext) -> str:
        schedule = await _own(self.book, args.schedule_id, context)
        await self.book.store.delete_schedule(schedule.id)
        return f"Cancelled schedule {schedule.id} ({describe_cadence(schedule.cadence)})."

    async def runs(self, args: ScheduleIdArgs, context: ToolContext) -> str:
        schedule = await _own(self.book, args.schedule_id, context)
        found = await self.book.store.list_runs(schedule.id, limit=5)
        if not found:
            return f"Schedule {schedule.id} has not run yet; {_state(schedule)}."
        lines = [
            f"{r.id} {_when(r.started_at)}: {r.status}"
            + (f", delivered: {r.output[:200]}" if r.delivered else "")
            + (f", error: {r.error[:200]}" if r.error else "")
            for r in found
        ]
        return "\n".join([*lines, f"Schedule {schedule.id}: {_state(schedule)}."])

    async def run_output(self, args: ScheduleRunOutputArgs, context: ToolContext) -> str:
        # Scoped as `schedule_runs`: the schedule must be the asker's in this chat, and the
        # run one of its runs. A long output is cut by the runtime, read on with
        # `read_tool_output` (core/tool_calls.py).
        schedule = await _own(self.book, args.schedule_id, context)
        if args.run_id is None:
            latest = await self.book.store.list_runs(schedule.id, limit=1)
            run = latest[0] if latest else None
            if run is None:
                return f"Schedule {schedule.id} has not run yet; {_state(schedule)}."
        else:
            run = await self.book.store.get_run(args.run_id)
            if run is None or run.schedule_id != schedule.id:
                raise ToolError(f"Schedule {schedule.id} has no run {args.run_id!r}.")
        head = f"Run {run.id} of schedule {schedule.id}, {_when(run.started_at)}: {run.status}"
        if run.error:
            head += f", error: {run.error}"
        return f"{head}\n{run.output}" if run.output else f"{head}; it has no output."


def _cadence(args: ScheduleCreateArgs, now: datetime) -> Cadence:
    if args.delay is not None:
        return OnceCadence(at=now + timedelta(seconds=parse_duration(args.delay)))
    if args.at is not None:
        at = parse_at(args.at, tz=args.timezone, now=now)
        return OnceCadence(at=at, timezone=parse_timezone(args.timezone).key)
    if args.every is not None:
        return IntervalCadence(seconds=parse_duration(args.every), start=now)
    assert args.cron is not None
    return make_cron(args.cron, args.timezone)


def _chat(context: ToolContext) -> Address:
    if context.address is None:
        raise ToolError("Schedules can only be made from a chat.")
    return context.address


async def _own(book: ScheduleBook, schedule_id: str, context: ToolContext) -> Schedule:
    try:
        schedule = await book.get(schedule_id)
    except StoreError:
        raise ToolError(f"No schedule {schedule_id!r} in this chat.") from None
    address = _chat(context)
    same_chat = (
        schedule.deliver_to.platform == address.platform
        and schedule.deliver_to.chat == address.chat
        and schedule.deliver_to.thread == address.thread
    )
    if not same_chat and not context.is_admin:
        raise ToolError(f"No schedule {schedule_id!r} in this chat.")
    if not may_manage(schedule, requester=_requester(context), is_admin=context.is_admin):
        raise ToolError(
            f"Schedule {schedule_id} belongs to someone else: only the person who made it "
            "or an admin may change it or see its runs."
        )
    return schedule


def _requester(context: ToolContext) -> str:
    """Who asks, as schedules record owners: "<platform>:<user id>"."""
    return f"{context.platform}:{context.user_id}"


def describe_cadence(cadence: Cadence) -> str:
    """A short human description: "once at …", "every 5m", "cron '0 9 * * 1-5' (Europe/Paris)"."""
    match cadence:
        case OnceCadence(at=at):
            return f"once at {_when(at)}"
        case IntervalCadence(seconds=seconds):
            return f"every {_duration(seconds)}"
        case _:
            return f"cron '{cadence.expression}' ({cadence.timezone})"


def _duration(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _when(moment: datetime | None) -> str:
    return "none" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def schedule_line(schedule: Schedule, *, with_prompt: bool) -> str:
    """One schedule as chat listings show it; the prompt only for its owner or an admin, and
    a next run only while it is active (a paused one has none)."""
    line = (
        f"{schedule.id}: {describe_cadence(schedule.cadence)}, {schedule.status}, "
        f"next {_next(schedule)}, notify {schedule.notify}"
    )
    if not with_prompt:
        return f"{line} (made by {_maker(schedule)})"
    return f"{line}: {schedule.prompt[:80]}"


def _next(schedule: Schedule) -> str:
    """The next run, or "none" when it is not active: a paused schedule keeps its stored time
    for resuming, but will not run then."""
    return _when(schedule.next_run_at) if schedule.status == "active" else "none"


def _state(schedule: Schedule) -> str:
    """When it runs next, or what it is instead and why ("it is disabled (its run failed…)")."""
    if schedule.status == "active":
        return f"next run {_next(schedule)}"
    reason = f" ({schedule.status_reason})" if schedule.status_reason else ""
    return f"it is {schedule.status}{reason}"


def _maker(schedule: Schedule) -> str:
    return "the operator" if schedule.owner == "cli" else "someone else"
