"""Delivery receipts end to end: the real Telegram adapter against the Bot API fake.

A schedule run's answer goes to `outbound.telegram`; the gateway reports what became of it on
`receipts`; the `ReceiptDesk` records it on the run and fans out `notification.sent|failed`.
A delivery that keeps failing goes to the dead letters, and `switchboard deadletters replay`
(the real CLI, on the same SQLite file) sends it again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from bots.cli import main
from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.sql.bus import SqliteBus
from core.backends.sql.store import SqlStore
from core.bus.base import Subscription
from core.bus.names import NOTIFICATIONS, outbound_queue
from core.clock import utc_now
from core.envelopes import (
    Address,
    NotificationFailed,
    NotificationSent,
    NotificationSource,
    Outbound,
)
from core.notifications import ReceiptDesk
from core.readiness import Readiness
from core.redact import Redactor
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store.replies import MemoryReplyRecords
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.fakes.telegram_api import FakeTelegram

CHAT = 4242
TARGET = Address(platform="telegram", chat=str(CHAT))
PATIENCE = 10.0
SECRET = "hunter2-secret-value-for-the-test"


@dataclass
class Stack:
    store: SqlStore
    bus: SqliteBus
    book: ScheduleBook
    notifications: Subscription

    async def answer_of_a_run(self, text: str) -> tuple[Schedule, ScheduleRun]:
        """A schedule whose run finished with `text` to deliver, and its outbound queued."""
        now = utc_now()
        schedule = await self.book.create(
            cadence=IntervalCadence(seconds=3600, start=now),
            prompt="Anything new?",
            deliver_to=TARGET,
            owner="cli",
        )
        run = ScheduleRun(
            id="run-1",
            schedule_id=schedule.id,
            due_at=now,
            started_at=now,
            status="succeeded",
            output=text,
            delivery="pending",
        )
        await self.store.save_run(run)
        source = NotificationSource(kind="schedule", name=schedule.id, run_id=run.id)
        await self.bus.enqueue(
            outbound_queue("telegram"),
            Outbound(kind="notification", address=TARGET, text=text, source=source),
        )
        return schedule, run

    async def next_notification(self) -> NotificationSent | NotificationFailed:
        async with asyncio.timeout(PATIENCE):
            async for event in self.notifications:
                assert isinstance(event, NotificationSent | NotificationFailed)
                return event
        raise AssertionError("the notifications subscription ended")

    async def run_record(self, schedule: Schedule) -> ScheduleRun:
        [run] = await self.store.list_runs(schedule.id)
        return run


@pytest.fixture
async def stack(
    fake_telegram: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    """A Telegram gateway and a receipt desk on the SQLite file of `tmp_path/data`."""
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    path = tmp_path / "data" / "switchboard.db"
    store = await SqlStore.open(f"sqlite:///{path}")
    bus = await SqliteBus.open(path, lease_seconds=5.0, max_deliveries=2)
    records = MemoryReplyRecords()
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake_telegram.token), api_url=fake_telegram.url),
        menu=(),
        replies=ReplyStreams(records, IncrementalRender()),
    )
    readiness = Readiness()
    gateway = Gateway(
        adapter,
        bus,
        mailboxes=MemoryMailboxes(),
        readiness=readiness,
        replies=records,
        max_deliveries=2,
    )
    book = ScheduleBook(store)
    desk = ReceiptDesk(
        bus=bus, store=store, book=book, redactor=Redactor([SECRET]), readiness=readiness
    )
    notifications = await bus.subscribe(NOTIFICATIONS)
    tasks = [asyncio.create_task(gateway.run()), asyncio.create_task(desk.run())]
    try:
        await fake_telegram.wait_idle_poll(timeout=PATIENCE)
        yield Stack(store, bus, book, notifications)
    finally:
        await gateway.stop()
        await desk.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await notifications.aclose()
        await bus.close()
        await store.close()


async def test_a_delivered_answer_is_recorded_with_its_message_id(
    stack: Stack, fake_telegram: FakeTelegram
) -> None:
    schedule, _ = await stack.answer_of_a_run(f"Rain at noon. (key {SECRET})")

    event = await stack.next_notification()

    [message] = fake_telegram.messages[CHAT]
    assert isinstance(event, NotificationSent)
    assert (event.name, event.address, event.source.name) == (
        "notification.sent",
        TARGET,
        schedule.id,
    )
    assert event.platform_message_id == str(message.message_id)
    assert SECRET not in event.text and "Rain at noon." in event.text
    run = await stack.run_record(schedule)
    assert (run.delivery, run.delivered) == ("delivered", True)
    assert run.delivery_detail == str(message.message_id)


async def test_a_refused_answer_is_failed_and_counts_toward_the_alert(
    stack: Stack, fake_telegram: FakeTelegram
) -> None:
    fake_telegram.fail_next(
        "sendMessage",
        error_code=403,
        description="Forbidden: bot was blocked by the user",
        retry_after=None,
    )
    schedule, _ = await stack.answer_of_a_run("You have mail.")

    event = await stack.next_notification()

    assert isinstance(event, NotificationFailed)
    assert (event.status, event.name) == ("failed", "notification.failed")
    assert "blocked" in event.reason
    run = await stack.run_record(schedule)
    assert (run.delivery, run.delivered) == ("failed", False)
    assert "blocked" in run.delivery_detail
    counted = await stack.book.get(schedule.id)
    assert counted.consecutive_failures == 1


async def test_a_dead_lettered_answer_is_delivered_by_a_replay(
    stack: Stack, fake_telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_telegram.fail_next(
        "sendMessage", error_code=502, description="Bad Gateway", retry_after=None, times=2
    )
    schedule, _ = await stack.answer_of_a_run("Build is green.")

    failed = await stack.next_notification()

    assert isinstance(failed, NotificationFailed)
    assert failed.status == "dead_lettered"
    run = await stack.run_record(schedule)
    assert (run.delivery, run.delivered) == ("dead_lettered", False)
    [dead] = await stack.bus.dead_letter_entries(outbound_queue("telegram"))

    await _switchboard("deadletters", "list")
    assert dead.id in capsys.readouterr().out
    await _switchboard("deadletters", "show", dead.id, "--queue", "outbound.telegram")
    shown = json.loads(capsys.readouterr().out)
    assert (shown["queue"], shown["deliveries"]) == ("outbound.telegram", 2)
    assert shown["envelope"]["text"] == "Build is green."
    await _switchboard("deadletters", "show", dead.id, "--queue", "nowhere", code=1)
    await _switchboard("deadletters", "replay", dead.id)
    assert f"Replayed {dead.id}" in capsys.readouterr().out

    delivered = await stack.next_notification()
    assert isinstance(delivered, NotificationSent)
    assert fake_telegram.sent_texts(CHAT) == ["Build is green."]
    run = await stack.run_record(schedule)
    assert (run.delivery, run.delivered) == ("delivered", True)
    assert await stack.bus.dead_letter_entries(outbound_queue("telegram")) == []
    await _switchboard("deadletters", "drop", dead.id, code=1)


async def _switchboard(*args: str, code: int = 0) -> None:
    """Run the real CLI in a thread (it runs its own event loop) and check its exit code."""

    def run() -> int:
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert await asyncio.to_thread(run) == code
