"""The watchdog's acceptance test: a Telegram gateway whose polling is cut while the Slack
gateway works leads to exactly one alert to the admin on Slack within the threshold, and one
recovery notice once polling resumes; `/readyz`'s readiness names the deaf platform meanwhile.

Both gateways run in-process around the real adapters (python-telegram-bot against
`FakeTelegram`, slack-bolt against `FakeSlack`), in both deployments: embedded, one SQLite bus
and one watchdog, as `switchboard serve` runs them; distributed, each gateway on its own Redis
connection with its own watchdog, as two `switchboard gateway` processes (the alert crosses
Redis to the Slack gateway). The watchdogs' clock is moved by hand and `check()` is called
directly instead of waiting for their loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bots.limits import admin_dms
from channels.gateway import Gateway
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.redis.bus import RedisBus
from core.backends.redis.client import connect_redis
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.bus import SqliteBus
from core.bus.base import Bus
from core.mailbox.base import Mailboxes
from core.readiness import Readiness
from core.watchdog import AdminAlerts, Watchdog, WatchdogSettings
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, PATIENCE, local_replies

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ADMIN = "U_ADMIN"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Process:
    """One serving process's parts: its bus, mailboxes, readiness and watchdog."""

    def __init__(self, bus: Bus, mailboxes: Mailboxes, clock: Clock) -> None:
        self.clock = clock
        self.bus = bus
        self.mailboxes = mailboxes
        self.readiness = Readiness()
        self.watchdog = Watchdog(
            # Slack has no threshold of its own and no usual rate yet: never called silent.
            WatchdogSettings(silent_after={"telegram": "30m"}),
            readiness=self.readiness,
            tell=AdminAlerts(bus, admin_dms([f"slack:{ADMIN}", "telegram:7"])),
            clock=clock,
        )


@pytest.fixture(params=["embedded", "distributed"])
def deployment(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The deployment, with the test Redis's URL for the distributed one (a sync fixture: it
    starts Redis only when asked, which an async fixture cannot do by name)."""
    if request.param == "distributed":
        return request.param, request.getfixturevalue("redis_server").url
    return request.param, None


@pytest.fixture
async def processes(
    deployment: tuple[str, str | None], tmp_path: Path
) -> AsyncIterator[tuple[Process, Process]]:
    """The processes serving Telegram and Slack: one (embedded) or one each (distributed)."""
    clock = Clock()
    _, url = deployment
    async with AsyncExitStack() as stack:
        if url is None:
            bus = await SqliteBus.open(tmp_path / "queues.db")
            stack.push_async_callback(bus.close)
            serve = Process(bus, MemoryMailboxes(), clock)
            yield serve, serve
            return
        # A bot of its own on the shared test Redis: nothing left by other tests is seen.
        keys = RedisKeys(f"watch{uuid.uuid4().hex[:8]}")
        made: list[Process] = []
        for _ in range(2):
            redis_bus = await RedisBus.connect(url, keys=keys)
            stack.push_async_callback(redis_bus.close)
            client = connect_redis(url)
            stack.push_async_callback(client.aclose)
            made.append(Process(redis_bus, RedisMailboxes(client, keys=keys), clock))
        yield made[0], made[1]


async def seen(watchdog: Watchdog, ready: Callable[[], bool], what: str) -> None:
    """Wait until `ready()` holds, re-checked whenever a gateway reports to the watchdog."""
    try:
        async with asyncio.timeout(PATIENCE * 3):
            while not ready():
                await watchdog.changed.wait()
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}: {watchdog.health()}") from None


async def test_a_telegram_gateway_whose_polling_is_cut_is_told_once_on_slack(
    processes: tuple[Process, Process], fake_telegram: FakeTelegram, fake_slack: FakeSlack
) -> None:
    serving_telegram, serving_slack = processes
    clock, watchdog = serving_telegram.clock, serving_telegram.watchdog
    readiness = serving_telegram.readiness
    telegram = TelegramAdapter(
        TelegramSettings(
            token=SecretStr(fake_telegram.token), api_url=fake_telegram.url, poll_timeout=1
        ),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    slack = SlackAdapter(
        SlackSettings(
            bot_token=SecretStr(fake_slack.bot_token),
            api_url=fake_slack.api_url,
            signing_secret=SecretStr(fake_slack.signing_secret),
            host="127.0.0.1",
            port=0,
        ),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    gateways = [
        Gateway(
            adapter,
            process.bus,
            mailboxes=process.mailboxes,
            readiness=process.readiness,
            watchdog=process.watchdog,
        )
        for adapter, process in ((telegram, serving_telegram), (slack, serving_slack))
    ]
    tasks = [asyncio.create_task(g.run()) for g in gateways]
    try:
        await fake_telegram.wait_idle_poll(timeout=PATIENCE)
        await asyncio.wait_for(slack.listening.wait(), PATIENCE)

        fake_telegram.push(fake_telegram.private_text(7, "hello"))
        await seen(watchdog, lambda: watchdog.health()[0].last_update is not None, "the update")
        await seen(watchdog, lambda: watchdog.health()[0].last_poll is not None, "a poll")

        # Cut: the next getUpdates never answers (PTB gives up on it after its read timeout).
        fake_telegram.stall_next("getUpdates")
        start = len(fake_telegram.calls)
        await fake_telegram.wait_for_call("getUpdates", after=start, timeout=PATIENCE)

        clock.now = T0 + timedelta(minutes=29)
        assert await watchdog.check() == []
        clock.now = T0 + timedelta(minutes=31)
        [incident] = await watchdog.check()
        assert incident.platform == "telegram"
        report = await readiness.report()
        assert not report.ready and "telegram watchdog" in report.details
        await fake_slack.until(lambda: len(fake_slack.sent_texts(ADMIN)) == 1, "the alert")
        [alert] = fake_slack.sent_texts(ADMIN)
        assert alert.startswith("telegram looks deaf: no poll has succeeded for 31 min")
        # Checked again while still cut: nobody is told twice.
        clock.now = T0 + timedelta(minutes=40)
        assert await watchdog.check() == []

        # Polling resumes by itself once PTB gives up on the stalled call.
        await seen(
            watchdog,
            lambda: watchdog.health()[0].last_poll == clock.now,
            "a poll after the cut",
        )
        [recovered] = await watchdog.check()
        assert recovered.platform == "telegram"
        assert (await readiness.report()).ready
        await fake_slack.until(lambda: len(fake_slack.sent_texts(ADMIN)) == 2, "the recovery")
        assert fake_slack.sent_texts(ADMIN)[1].startswith("telegram recovered after 9 min")
        assert await watchdog.check() == []
        # The admin on Telegram, the platform in trouble, was not written to.
        assert fake_telegram.sent_texts(7) == []
    finally:
        for gateway in gateways:
            await gateway.stop()
        async with asyncio.timeout(PATIENCE * 3):
            await asyncio.gather(*tasks)
