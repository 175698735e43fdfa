"""A watchdog for a deaf bot: per platform, when it last heard an update, polled, and
delivered, and how many deliveries failed; an incident when it goes silent or its deliveries
keep failing, told to the admins once on another platform, and again when it recovers.

The gateway reports to it (`received`, `polled`, `delivered`); `check(now)` is the state
machine, called every `check_every` by `run()` (tests call it with a clock moved by hand):

    quiet ──problem──▶ incident (alert once, readiness down) ──no problem──▶ quiet (recovered)

A platform's problem is one of:

- **silent**: no update for longer than its threshold. The threshold is `[watchdog]
  silent_after` (for every platform, or per platform), else learned: `learn_multiple` times
  the median gap between its last `_WINDOW` updates, never under `learn_floor`. Without a
  setting, a platform that has not yet seen `_LEARN_AFTER` updates is never called silent
  (it does not normally see traffic, as far as the watchdog knows).
- **not polling**: a polling adapter (Telegram without a webhook) whose last successful poll is
  older than that threshold (`learn_floor` when none is set): polls answer every few seconds,
  quiet or not, so such a platform is judged by its polls alone, not by its traffic.
- **failing**: the last `failures` deliveries all failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import statistics
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.bus.base import Bus
from core.bus.names import EVENTS, outbound_queue
from core.clock import Clock, utc_now
from core.envelopes import Address, EventEnvelope, NotificationSource, Outbound
from core.readiness import Readiness
from core.scheduling.cadence import CadenceError, parse_duration

if TYPE_CHECKING:
    from core.metrics import Metrics

__all__ = [
    "PLATFORM_RECOVERED",
    "PLATFORM_SILENT",
    "AdminAlerts",
    "Incident",
    "PlatformHealth",
    "Watchdog",
    "WatchdogSettings",
]

log = logging.getLogger(__name__)

# The events on the `events` topic that tell of an incident and of its end.
PLATFORM_SILENT: Final = "platform.silent"
PLATFORM_RECOVERED: Final = "platform.recovered"

# How many recent updates (and deliveries) the watchdog keeps per platform.
_WINDOW: Final = 20
# Updates seen before a threshold is learned (without `silent_after`).
_LEARN_AFTER: Final = 6

ProblemKind = Literal["silent", "not_polling", "failing"]


def _seconds(value: object) -> object:
    """A duration setting ("30m", "2h", 90) as seconds; other values go on to validation."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except CadenceError as exc:
            raise ValueError(str(exc)) from None
    return value


class WatchdogSettings(BaseModel):
    """`[watchdog]` of profile.toml (docs/operators.md, "Watchdog")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Seconds without an update after which a platform is silent: one for every platform,
    # or per platform (`[watchdog.silent_after] telegram = "30m"`); unset: learned.
    silent_after: float | dict[str, float] | None = None
    learn_multiple: float = Field(default=10.0, ge=2)
    learn_floor: float = Field(default=900.0, gt=0)
    # Deliveries failing in a row that make an incident.
    failures: int = Field(default=5, ge=1)
    check_every: float = Field(default=30.0, gt=0)
    enabled: bool = True

    @field_validator("silent_after", mode="before")
    @classmethod
    def _durations(cls, value: object) -> object:
        if isinstance(value, Mapping):
            return {str(key): _seconds(item) for key, item in value.items()}
        return _seconds(value)

    @field_validator("learn_floor", "check_every", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return _seconds(value)

    def threshold_for(self, platform: str) -> float | None:
        """The set threshold of `platform` in seconds, or None (learned)."""
        if isinstance(self.silent_after, dict):
            return self.silent_after.get(platform)
        return self.silent_after


class PlatformHealth(BaseModel):
    """What `/metrics`, `switchboard status` and the heartbeat show of one platform."""

    model_config = ConfigDict(frozen=True)

    platform: str
    last_update: datetime | None = None
    last_delivery: datetime | None = None
    last_poll: datetime | None = None
    # Seconds since the last update, delivery and successful poll (None: never).
    since_update: float | None = None
    since_delivery: float | None = None
    poll_lag: float | None = None
    # Failed share of the last deliveries (None: none yet), and failures in a row.
    failure_rate: float | None = None
    failing_in_a_row: int = 0
    # Seconds of silence that make an incident (None: not known yet).
    threshold: float | None = None
    # The open incident's sentence, or None.
    incident: str | None = None
    # The open incident's kind (silent, not_polling, failing), or None.
    problem: ProblemKind | None = None


@dataclass(frozen=True)
class Incident:
    """A platform's problem, open since `since`."""

    platform: str
    kind: ProblemKind
    reason: str
    since: datetime


@dataclass
class _Watch:
    """What the watchdog knows of one platform."""

    updates: deque[datetime] = field(default_factory=lambda: deque(maxlen=_WINDOW))
    outcomes: deque[bool] = field(default_factory=lambda: deque(maxlen=_WINDOW))
    last_delivery: datetime | None = None
    last_poll: datetime | None = None
    polls: bool = False
    failing: int = 0
    # Since when this process receives the platform's updates (None: it only delivers, as a
    # gateway standing by for the reader lease does): silence counts only from then.
    started: datetime | None = None
    incident: Incident | None = None


# Tells the admins; gets the sentence and the platform it is about.
Tell = Callable[[str, str, bool], Awaitable[None]]


class Watchdog:
    """Watches the platforms one process serves; see the module docstring."""

    def __init__(
        self,
        settings: WatchdogSettings,
        *,
        readiness: Readiness | None = None,
        tell: Tell | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self.readiness = readiness
        self._tell = tell
        self._clock = clock
        self._watches: dict[str, _Watch] = {}
        self._stopping = asyncio.Event()
        # Set on every report, for tests waiting on what the gateway saw.
        self.changed = asyncio.Event()

    # --- what the gateway reports ----------------------------------------------------------

    def watch(self, platform: str) -> None:
        """This process receives `platform`'s updates from now on: its silence counts."""
        found = self._watch(platform)
        if found.started is None:
            found.started = self._clock()

    def received(self, platform: str) -> None:
        """An update of `platform` reached the gateway (so this process receives it)."""
        self.watch(platform)
        self._watch(platform).updates.append(self._clock())
        self._changed()

    def polled(self, platform: str) -> None:
        """A poll of `platform` succeeded (with or without updates)."""
        self.watch(platform)
        found = self._watch(platform)
        found.polls = True
        found.last_poll = self._clock()
        self._changed()

    def delivered(self, platform: str, *, ok: bool) -> None:
        """A delivery to `platform` succeeded or failed."""
        found = self._watch(platform)
        found.outcomes.append(ok)
        if ok:
            found.last_delivery = self._clock()
            found.failing = 0
        else:
            found.failing += 1
        self._changed()

    # --- the state machine -----------------------------------------------------------------

    def threshold(self, platform: str) -> float | None:
        """Seconds of silence that make an incident of `platform`, or None (not known)."""
        found = self._watch(platform)
        setting = self.settings.threshold_for(platform)
        if setting is not None:
            return setting
        if len(found.updates) < _LEARN_AFTER:
            return None
        times = list(found.updates)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        return max(
            self.settings.learn_floor, self.settings.learn_multiple * statistics.median(gaps)
        )

    def problem(self, platform: str, now: datetime) -> tuple[ProblemKind, str] | None:
        """What is wrong with `platform` at `now`, in one sentence, or None."""
        found = self._watch(platform)
        if found.failing >= self.settings.failures:
            return "failing", f"its last {found.failing} deliveries failed"
        if found.started is None:
            return None  # not receiving here: nothing to hear
        threshold = self.threshold(platform)
        if found.polls:
            # A poll that answers, with updates or without, is a platform that hears.
            limit = timedelta(seconds=threshold or self.settings.learn_floor)
            last = found.last_poll or found.started
            if last is not None and now - last > limit:
                return "not_polling", f"no poll has succeeded for {_span(now - last)}"
            return None
        if threshold is None:
            return None
        limit = timedelta(seconds=threshold)
        last = found.updates[-1] if found.updates else found.started
        if last is not None and now - last > limit:
            return "silent", f"no update for {_span(now - last)} (threshold {_span(limit)})"
        return None

    async def check(self, now: datetime | None = None) -> list[Incident]:
        """Open or close each platform's incident; tell the admins of each change once.
        Returns the incidents opened or closed (a closed one for a recovery)."""
        now = now or self._clock()
        changes: list[Incident] = []
        # A copy: telling awaits, and a gateway may start a new watch meanwhile.
        for platform, found in list(self._watches.items()):
            problem = self.problem(platform, now)
            if problem is not None and found.incident is None:
                kind, reason = problem
                found.incident = Incident(platform, kind, reason, now)
                changes.append(found.incident)
                if self.readiness is not None:
                    self.readiness.down(f"{platform} watchdog", reason)
                await self._say(platform, f"{platform} looks deaf: {reason}.", False)
            elif problem is None and found.incident is not None:
                opened = found.incident
                found.incident = None
                changes.append(opened)
                if self.readiness is not None:
                    self.readiness.up(f"{platform} watchdog")
                await self._say(
                    platform,
                    f"{platform} recovered after {_span(now - opened.since)} ({opened.reason}).",
                    True,
                )
        return changes

    def health(self, now: datetime | None = None) -> list[PlatformHealth]:
        """What the watchdog knows of each platform at `now`."""
        now = now or self._clock()
        return [self._health(platform, found, now) for platform, found in self._watches.items()]

    async def run(self) -> None:
        """`check()` every `check_every` seconds until `stop()`."""
        while not self._stopping.is_set():
            try:
                await self.check()
            except Exception:
                log.warning("the watchdog's check failed", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.settings.check_every)

    def stop(self) -> None:
        """End `run()`."""
        self._stopping.set()

    async def probe(self, metrics: Metrics) -> None:
        """A metrics probe: the per-platform gauges, read at scrape time."""
        for health in self.health():
            platform = health.platform
            gauges = (
                (metrics.platform_since_update, health.since_update),
                (metrics.platform_since_delivery, health.since_delivery),
                (metrics.platform_poll_lag, health.poll_lag),
                (metrics.platform_failure_rate, health.failure_rate),
            )
            for gauge, value in gauges:
                # NaN: never seen (Prometheus shows it; 0 would look like "just now").
                gauge.labels(platform=platform).set(float("nan") if value is None else value)
            metrics.platform_incident.labels(platform=platform).set(
                0 if health.incident is None else 1
            )

    # --- inside ----------------------------------------------------------------------------

    def _watch(self, platform: str) -> _Watch:
        found = self._watches.get(platform)
        if found is None:
            found = self._watches[platform] = _Watch()
        return found

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def _say(self, platform: str, text: str, recovered: bool) -> None:
        log.log(logging.INFO if recovered else logging.WARNING, "%s", text)
        if self._tell is None:
            return
        try:
            await self._tell(platform, text, recovered)
        except Exception:
            # Telling is best effort; the incident stands (readiness and metrics show it).
            log.warning("could not tell the admins: %s", text, exc_info=True)

    def _health(self, platform: str, found: _Watch, now: datetime) -> PlatformHealth:
        last_update = found.updates[-1] if found.updates else None
        outcomes = list(found.outcomes)
        return PlatformHealth(
            platform=platform,
            last_update=last_update,
            last_delivery=found.last_delivery,
            last_poll=found.last_poll,
            since_update=_ago(last_update, now),
            since_delivery=_ago(found.last_delivery, now),
            poll_lag=_ago(found.last_poll, now),
            failure_rate=(outcomes.count(False) / len(outcomes)) if outcomes else None,
            failing_in_a_row=found.failing,
            threshold=self.threshold(platform),
            incident=None if found.incident is None else found.incident.reason,
            problem=None if found.incident is None else found.incident.kind,
        )


class AdminAlerts:
    """Tells the admins of an incident: a `platform.silent` / `platform.recovered` event on
    the `events` topic (hooks and `switchboard events` see it), and a notification to each
    admin DM address on another platform than the one in trouble."""

    def __init__(self, bus: Bus, admin_dms: Sequence[Address] = ()) -> None:
        self.bus = bus
        self.admin_dms = tuple(admin_dms)

    async def __call__(self, platform: str, text: str, recovered: bool) -> None:
        """Publish the event, then enqueue the DMs (none on the platform itself)."""
        await self.bus.publish(
            EVENTS,
            EventEnvelope(
                name=PLATFORM_RECOVERED if recovered else PLATFORM_SILENT,
                session_id="",
                run_id="",
                data={"platform": platform, "text": text},
            ),
        )
        for address in self.admin_dms:
            if address.platform == platform:
                continue
            await self.bus.enqueue(
                outbound_queue(address.platform),
                Outbound(
                    kind="notification",
                    address=address,
                    text=text,
                    source=NotificationSource(kind="alert", name=f"watchdog:{platform}"),
                ),
            )


def _ago(then: datetime | None, now: datetime) -> float | None:
    return None if then is None else max((now - then).total_seconds(), 0.0)


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
