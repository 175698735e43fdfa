"""`ReceiptDesk`: failed deliveries of a schedule's answers count toward its alert."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from core.backends.sql.store import SqlStore
from core.bus.names import NOTIFICATIONS, outbound_queue
from core.clock import utc_now
from core.envelopes import (
    Address,
    NotificationFailed,
    NotificationSource,
    Outbound,
    Receipt,
)
from core.notifications import ReceiptDesk, delivery_summary
from core.readiness import Readiness
from core.redact import Redactor
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, ScheduleRun
from tests.backends.memory_bus import MemoryBus

TARGET = Address(platform="telegram", chat="42")


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def test_failed_answers_alert_the_chat_then_disable_the_schedule(
    bus: MemoryBus, store: SqlStore
) -> None:
    book = ScheduleBook(store, notify_after=2, disable_after=3)
    desk = ReceiptDesk(bus=bus, store=store, book=book, redactor=Redactor(), readiness=Readiness())
    now = utc_now()
    schedule = await book.create(
        cadence=IntervalCadence(seconds=3600, start=now),
        prompt="Anything?",
        deliver_to=TARGET,
        owner="cli",
    )
    events = await bus.subscribe(NOTIFICATIONS)
    receipts = []
    for n in range(3):
        run = ScheduleRun(
            id=f"run-{n}", schedule_id=schedule.id, due_at=now, started_at=now, delivery="pending"
        )
        await store.save_run(run)
        source = NotificationSource(kind="schedule", name=schedule.id, run_id=run.id)
        outbound = Outbound(kind="notification", address=TARGET, text="hi", source=source)
        receipt = Receipt(
            outbound=outbound,
            status="failed",
            reason="bot was blocked",
            at=now + timedelta(seconds=n),
        )
        receipts.append(receipt)
        await desk.handle(receipt)
    await desk.handle(receipts[0])  # a redelivered receipt counts once

    after = await book.get(schedule.id)
    assert (after.consecutive_failures, after.status) == (3, "disabled")
    alerts = []
    while (
        got := await bus.receive(outbound_queue("telegram"), consumer="t", timeout=0)
    ) is not None:
        alerts.append(got.envelope)
    assert [a.source.kind for a in alerts if isinstance(a, Outbound) and a.source] == [
        "alert",
        "alert",
    ]
    texts = [a.text for a in alerts if isinstance(a, Outbound)]
    assert "could not be delivered or run 2 times" in texts[0]
    assert "now disabled" in texts[1] and "bot was blocked" in texts[1]
    runs = await store.list_runs(schedule.id)
    assert {delivery_summary(r) for r in runs} == {"failed"}
    # One event per receipt, the redelivered one not published again.
    published = [await anext(aiter(events)) for _ in range(3)]
    failed = [e for e in published if isinstance(e, NotificationFailed)]
    assert [e.source.run_id for e in failed] == ["run-0", "run-1", "run-2"]
    await bus.publish(NOTIFICATIONS, published[0])  # a marker: nothing came before it
    assert await anext(aiter(events)) == published[0]
    await events.aclose()
