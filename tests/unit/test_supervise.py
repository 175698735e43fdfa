"""`serve` keeps each platform going on its own: retried with backoff, the others serving."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from bots.supervise import PlatformRunner, ServedPlatforms, Stoppable
from core.errors import ChannelError, ConfigError, SwitchboardError
from core.readiness import Readiness


class _Gateway:
    """Fails with the given errors, one per attempt, then serves until stopped."""

    def __init__(
        self, failures: list[Exception], attempts: list[str], serving: asyncio.Event
    ) -> None:
        self._failures = failures
        self._attempts = attempts
        self._serving = serving
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        self._attempts.append("attempt")
        if self._failures:
            raise self._failures.pop(0)
        self._serving.set()
        await self._stopped.wait()

    async def stop(self) -> None:
        self._stopped.set()


class _WatchedReadiness(Readiness):
    """Readiness that says when a mark went down."""

    def __init__(self) -> None:
        super().__init__()
        self.went_down = asyncio.Event()
        self.forgot: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def down(self, name: str, reason: str) -> None:
        super().down(name, reason)
        self.went_down.set()

    def forget(self, name: str) -> None:
        super().forget(name)
        self.forgot[name].set()


def _runner(
    name: str, failures: list[Exception], readiness: Readiness
) -> tuple[PlatformRunner, list[str], asyncio.Event]:
    attempts: list[str] = []
    serving = asyncio.Event()

    def build() -> Stoppable:
        return _Gateway(failures, attempts, serving)

    runner = PlatformRunner(name, build, readiness, first_wait=0.01, longest_wait=0.02, settled=0.0)
    return runner, attempts, serving


async def test_a_platform_that_cannot_connect_is_tried_again_while_another_serves() -> None:
    readiness = _WatchedReadiness()
    unreachable = [ChannelError("cannot reach the Slack Web API"), OSError("no route")]
    slack, slack_attempts, slack_serving = _runner("slack", unreachable, readiness)
    telegram, _, telegram_serving = _runner("telegram", [], readiness)
    platforms = ServedPlatforms([slack, telegram])

    running = asyncio.create_task(platforms.run())
    await telegram_serving.wait()
    await slack_serving.wait()

    assert slack_attempts == ["attempt"] * 3
    await readiness.forgot["slack connection"].wait()  # the third attempt held (`settled`)
    assert (await readiness.report()).ready
    await platforms.stop()
    await running  # stopping on purpose is no error


async def test_readiness_is_down_while_a_platform_waits_to_reconnect() -> None:
    readiness = _WatchedReadiness()
    attempts: list[str] = []
    never = asyncio.Event()

    class _Unreachable(_Gateway):
        async def run(self) -> None:
            attempts.append("attempt")
            raise ChannelError("cannot reach the Bot API")

    runner = PlatformRunner(
        "telegram",
        lambda: _Unreachable([], attempts, never),
        readiness,
        first_wait=30.0,
        longest_wait=30.0,
    )
    running = asyncio.create_task(runner.run())
    await readiness.went_down.wait()
    report = await readiness.report()
    assert attempts == ["attempt"]
    assert report.details == {"telegram connection": "cannot reach the Bot API"}

    await runner.stop()  # ends the long wait at once
    assert await running is None


async def test_a_refused_token_gives_that_platform_up_and_the_others_go_on() -> None:
    readiness = _WatchedReadiness()
    slack, slack_attempts, _ = _runner("slack", [ConfigError("Slack rejected it")], readiness)
    telegram, _, telegram_serving = _runner("telegram", [], readiness)
    platforms = ServedPlatforms([slack, telegram])

    running = asyncio.create_task(platforms.run())
    await telegram_serving.wait()
    await readiness.went_down.wait()  # slack given up
    await platforms.stop()
    await running

    assert slack_attempts == ["attempt"]
    assert (await readiness.report()).details == {"slack connection": "Slack rejected it"}


async def test_serve_ends_with_the_error_when_no_platform_can_run() -> None:
    readiness = Readiness()
    refused = ConfigError("Telegram rejected TELEGRAM_BOT_TOKEN")
    only, _, _ = _runner("telegram", [refused], readiness)
    with pytest.raises(ConfigError, match="Telegram rejected"):
        await ServedPlatforms([only]).run()

    one, _, _ = _runner("telegram", [ConfigError("a")], readiness)
    two, _, _ = _runner("slack", [ChannelError("b", permanent=True)], readiness)
    with pytest.raises(
        SwitchboardError, match=r"no chat platform could run \(telegram: a; slack: b\)"
    ):
        await ServedPlatforms([one, two]).run()


async def test_a_cancelled_runner_ends_instead_of_trying_again() -> None:
    readiness = _WatchedReadiness()
    runner, _, serving = _runner("telegram", [], readiness)
    running = asyncio.create_task(runner.run())
    await serving.wait()

    running.cancel()

    with pytest.raises(asyncio.CancelledError):
        await running
