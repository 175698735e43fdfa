"""Schedules and their runs: the records the scheduler, the store and the tools share."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.envelopes import Address

__all__ = [
    "Cadence",
    "CronCadence",
    "DeliveryState",
    "IntervalCadence",
    "Misfire",
    "NotifyPolicy",
    "OnceCadence",
    "RunStatus",
    "Schedule",
    "ScheduleRun",
    "ScheduleStatus",
]

NotifyPolicy = Literal["always", "conditional", "never"]
ScheduleStatus = Literal["active", "paused", "completed", "disabled"]
# `missed`: occurrences that never ran (late past the grace window); the record says why.
RunStatus = Literal["running", "succeeded", "failed", "missed"]
# What a run that comes late does: `run_once` runs (once) within the grace window, `skip`
# runs only when at most a minute late.
Misfire = Literal["skip", "run_once"]
# What became of a run's answer: `none` (nothing to deliver: the policy kept quiet, or the run
# failed), `pending` (sent to the chat's gateway, no receipt yet), then the gateway's receipt.
DeliveryState = Literal["none", "pending", "delivered", "failed", "dead_lettered"]


class OnceCadence(BaseModel):
    """Run once, at `at` (timezone-aware)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["once"] = "once"
    at: datetime
    # The IANA zone the time was given in: a late answer's note says the time in it.
    timezone: str = "UTC"


class IntervalCadence(BaseModel):
    """Run every `seconds`, counted from `start`."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["interval"] = "interval"
    seconds: int = Field(ge=1)
    start: datetime


class CronCadence(BaseModel):
    """Run at the times of a 5-field cron expression, read in an IANA timezone."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["cron"] = "cron"
    expression: str
    timezone: str = "UTC"


Cadence = Annotated[OnceCadence | IntervalCadence | CronCadence, Field(discriminator="kind")]


class Schedule(BaseModel):
    """A prompt run on a cadence, its answer delivered to a chat per a notification policy."""

    model_config = ConfigDict(frozen=True)

    id: str
    cadence: Cadence
    prompt: str = Field(min_length=1)
    deliver_to: Address
    notify: NotifyPolicy = "always"
    # Who made it: "<platform>:<user id>", or "cli" for the operator. Whether the owner is an
    # admin is read from the policy when it runs (records written with `owner_is_admin` load:
    # the field is ignored).
    owner: str
    status: ScheduleStatus = "active"
    # When the next run is due; None once nothing is left to run.
    next_run_at: datetime | None
    misfire: Misfire = "skip"
    # How late a run may still start under `run_once` (seconds).
    grace_seconds: int = Field(default=300, ge=0)
    consecutive_failures: int = 0
    # Why the schedule is not active, when something other than the operator made it so
    # ("disabled after 5 failed runs in a row: ..."); empty while it is active.
    status_reason: str = ""
    created_at: datetime
    updated_at: datetime


class ScheduleRun(BaseModel):
    """One firing of a schedule and what came of it."""

    model_config = ConfigDict(frozen=True)

    id: str
    schedule_id: str
    # The occurrence this run is for (the due time), and when it really started.
    due_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    status: RunStatus = "running"
    output: str = ""
    error: str = ""
    # True only once the platform confirmed the answer (`delivery == "delivered"`).
    delivered: bool = False
    duration_ms: float | None = None
    cost_usd: float | None = None
    delivery: DeliveryState = "none"
    # The platform's message id when delivered; the reason when failed or dead-lettered.
    delivery_detail: str = ""
    # When the receipt that set `delivery` was made (a later receipt wins: a replay).
    delivery_at: datetime | None = None
