"""Schedules: records, cadence math, the scheduler loop and the schedule tools."""

from core.scheduling.models import (
    Cadence,
    CronCadence,
    IntervalCadence,
    NotifyPolicy,
    OnceCadence,
    RunStatus,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
)

__all__ = [
    "Cadence",
    "CronCadence",
    "IntervalCadence",
    "NotifyPolicy",
    "OnceCadence",
    "RunStatus",
    "Schedule",
    "ScheduleRun",
    "ScheduleStatus",
]
