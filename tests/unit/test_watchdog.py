"""The watchdog's incident state machine (`core/watchdog.py`) on a clock moved by hand:
silent → told once → recovered, a learned threshold, failing deliveries, a poll that stopped,
what readiness and `/metrics` say, and how the admins are told."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.bus import EVENTS, outbound_queue
from core.envelopes import Address, EventEnvelope, Outbound
from core.errors import ConfigError
from core.heartbeat import Beating, ProcessInfo, SqliteHeartbeats
from core.metrics import Metrics
from core.profile import Profile
from core.readiness import Readiness
from core.watchdog import (
    PLATFORM_RECOVERED,
    PLATFORM_SILENT,
    AdminAlerts,
    Watchdog,
    WatchdogSettings,
)
from tests.backends.memory_bus import MemoryBus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A clock moved by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def move(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Told:
    """What the watchdog told the admins."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str, bool]] = []

    async def __call__(self, platform: str, text: str, recovered: bool) -> None:
        self.said.append((platform, text, recovered))


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_silent_platform_is_told_once_then_recovered_once() -> None:
    clock, told, readiness = Clock(), Told(), Readiness()
    dog = Watchdog(
        WatchdogSettings(silent_after="30m"), readiness=readiness, tell=told, clock=clock
    )
    dog.watch("telegram")
    dog.watch("slack")
    dog.received("telegram")
    dog.received("slack")

    clock.move(minutes=29)
    dog.received("slack")
    assert await dog.check() == []
    clock.move(minutes=2)
    [opened] = await dog.check()
    assert (opened.platform, opened.kind) == ("telegram", "silent")
    assert told.said == [
        ("telegram", "telegram looks deaf: no update for 31 min (threshold 30 min).", False)
    ]
    report = await readiness.report()
    assert not report.ready
    assert report.details["telegram watchdog"].startswith("no update for 31 min")

    # Still silent: not told again, however often it is checked.
    for _ in range(3):
        clock.move(minutes=10)
        dog.received("slack")
        assert await dog.check() == []
    assert len(told.said) == 1

    dog.received("telegram")
    [closed] = await dog.check()
    assert closed.platform == "telegram"
    assert told.said[1] == (
        "telegram",
        "telegram recovered after 30 min (no update for 31 min (threshold 30 min)).",
        True,
    )
    assert (await readiness.report()).ready
    assert await dog.check() == []


async def test_without_a_setting_the_threshold_is_learned_from_the_usual_gap() -> None:
    clock, told = Clock(), Told()
    dog = Watchdog(WatchdogSettings(learn_multiple=10, learn_floor=60), tell=told, clock=clock)
    dog.watch("slack")
    # A platform that has not shown its usual rate yet is never silent.
    clock.move(hours=5)
    assert await dog.check() == [] and dog.threshold("slack") is None
    for _ in range(6):
        dog.received("slack")
        clock.move(minutes=2)
    assert dog.threshold("slack") == 20 * 60
    clock.move(minutes=17)  # 19 minutes since the last update
    assert await dog.check() == []
    clock.move(minutes=2)
    [opened] = await dog.check()
    assert opened.kind == "silent"
    # The floor holds for a chatty platform: one update a second is not silent after 10 s.
    chatty = Watchdog(WatchdogSettings(learn_floor="15m"), clock=clock)
    for _ in range(6):
        chatty.received("discord")
        clock.move(seconds=1)
    assert chatty.threshold("discord") == 900


async def test_deliveries_failing_in_a_row_make_an_incident_until_one_succeeds() -> None:
    clock, told = Clock(), Told()
    dog = Watchdog(WatchdogSettings(failures=3), tell=told, clock=clock)
    dog.delivered("slack", ok=False)
    dog.delivered("slack", ok=False)
    dog.delivered("slack", ok=True)
    dog.delivered("slack", ok=False)
    dog.delivered("slack", ok=False)
    assert await dog.check() == []
    dog.delivered("slack", ok=False)
    [opened] = await dog.check()
    assert (opened.kind, opened.reason) == ("failing", "its last 3 deliveries failed")
    [health] = dog.health()
    assert health.failure_rate == pytest.approx(5 / 6)
    assert health.incident == "its last 3 deliveries failed"
    dog.delivered("slack", ok=True)
    assert len(await dog.check()) == 1
    assert [recovered for _, _, recovered in told.said] == [False, True]


async def test_a_poll_that_stopped_succeeding_is_an_incident_even_without_traffic() -> None:
    clock, told = Clock(), Told()
    dog = Watchdog(WatchdogSettings(silent_after={"telegram": 120}), tell=told, clock=clock)
    dog.watch("telegram")
    dog.received("telegram")
    for _ in range(5):
        clock.move(seconds=20)
        dog.polled("telegram")
    clock.move(seconds=100)
    assert await dog.check() == []
    clock.move(seconds=30)
    [opened] = await dog.check()
    assert (opened.kind, opened.reason) == ("not_polling", "no poll has succeeded for 2 min")
    # A platform with no setting of its own is not held to telegram's.
    assert dog.threshold("slack") is None


async def test_metrics_show_each_platform_as_the_watchdog_sees_it() -> None:
    clock, metrics = Clock(), Metrics()
    dog = Watchdog(WatchdogSettings(silent_after=60), clock=clock)
    dog.received("telegram")
    dog.polled("telegram")
    dog.delivered("telegram", ok=True)
    dog.delivered("telegram", ok=False)
    clock.move(seconds=90)
    await dog.check()
    metrics.add_probe(dog.probe)
    await metrics.refresh()
    text = metrics.render().decode()

    assert 'switchboard_platform_seconds_since_update{platform="telegram"} 90.0' in text
    assert 'switchboard_platform_seconds_since_delivery{platform="telegram"} 90.0' in text
    assert 'switchboard_platform_poll_lag_seconds{platform="telegram"} 90.0' in text
    assert 'switchboard_platform_delivery_failure_ratio{platform="telegram"} 0.5' in text
    assert 'switchboard_platform_incident{platform="telegram"} 1.0' in text


async def test_admins_are_told_on_another_platform_and_on_the_events_topic(
    bus: MemoryBus,
) -> None:
    events = await bus.subscribe(EVENTS)
    alerts = AdminAlerts(
        bus,
        [Address(platform="telegram", chat="7"), Address(platform="slack", chat="U1")],
    )
    await alerts("telegram", "telegram looks deaf: no update for 31 min.", False)
    await alerts("telegram", "telegram recovered after 5 min.", True)

    slack = outbound_queue("slack")
    first = await bus.receive(slack, consumer="t", timeout=0)
    second = await bus.receive(slack, consumer="t", timeout=0)
    for delivery, text in ((first, "telegram looks deaf"), (second, "telegram recovered")):
        assert delivery is not None
        outbound = delivery.envelope
        assert isinstance(outbound, Outbound) and outbound.address.chat == "U1"
        assert outbound.text.startswith(text)
    # Nothing for the admin on the platform in trouble.
    assert (await bus.queue_stats(outbound_queue("telegram"))).depth == 0
    names = []
    async for envelope in events:
        assert isinstance(envelope, EventEnvelope)
        names.append(envelope.name)
        if len(names) == 2:
            break
    await events.aclose()
    assert names == [PLATFORM_SILENT, PLATFORM_RECOVERED]


def test_watchdog_settings_read_durations_and_refuse_bad_ones() -> None:
    profile = Profile.parse(
        "p",
        {"watchdog": {"silent_after": {"telegram": "30m", "slack": "2h"}, "check_every": "15s"}},
        source="profile.toml",
        identity=None,
    )
    settings = profile.settings.watchdog
    assert (settings.threshold_for("telegram"), settings.threshold_for("slack")) == (1800, 7200)
    assert settings.threshold_for("discord") is None and settings.check_every == 15
    assert WatchdogSettings(silent_after="90").threshold_for("any") == 90
    with pytest.raises(ConfigError, match=r"^profile.toml: watchdog.silent_after: .*soon"):
        Profile.parse(
            "p", {"watchdog": {"silent_after": "soon"}}, source="profile.toml", identity=None
        )


async def test_each_heartbeat_carries_the_watchdog_s_view(tmp_path: Path) -> None:
    clock = Clock()
    dog = Watchdog(WatchdogSettings(silent_after=60), clock=clock)
    dog.received("telegram")
    clock.move(seconds=61)
    await dog.check()
    board = await SqliteHeartbeats.open(tmp_path / "beats.db")
    written = asyncio.Event()

    class Noted:
        """The SQLite board, saying when a beat was written."""

        async def beat(self, info: ProcessInfo) -> None:
            await board.beat(info)
            written.set()

        async def leave(self, process_id: str) -> None:
            await board.leave(process_id)

        async def processes(self, now: datetime) -> list[ProcessInfo]:
            return await board.processes(now)

        async def aclose(self) -> None:
            await board.aclose()

    info = ProcessInfo(
        id="serve-1", role="serve", host="h", pid=1, version="v", started_at=T0, seen_at=T0
    )
    beating = Beating(Noted(), info, platforms=dog.health, clock=clock, interval=3600)
    running = asyncio.create_task(beating.run())
    try:
        await asyncio.wait_for(written.wait(), 5)
        [process] = await board.processes(clock.now)
        [health] = process.platforms
        assert (health.platform, health.since_update) == ("telegram", 61)
        assert health.incident == "no update for 61 s (threshold 60 s)"
    finally:
        beating.stop()
        await running
        await board.aclose()


async def test_a_platform_this_process_only_delivers_to_is_never_silent() -> None:
    # A gateway standing by for Telegram's reader lease delivers but does not receive.
    clock, told = Clock(), Told()
    dog = Watchdog(WatchdogSettings(silent_after=60, failures=2), tell=told, clock=clock)
    dog.delivered("telegram", ok=True)
    clock.move(hours=3)
    assert await dog.check() == []
    dog.delivered("telegram", ok=False)
    dog.delivered("telegram", ok=False)
    [opened] = await dog.check()
    assert opened.kind == "failing"
    # Once it receives, its silence counts from then.
    dog.delivered("telegram", ok=True)
    await dog.check()
    dog.watch("telegram")
    clock.move(seconds=59)
    assert await dog.check() == []
    clock.move(seconds=2)
    assert [i.kind for i in await dog.check()] == ["silent"]
