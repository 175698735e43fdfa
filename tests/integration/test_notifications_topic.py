"""The `notifications` topic, seen from another process (embedded) and through Redis.

`SqliteBus` shares the topic through the data file, so `switchboard events --topic
notifications` (a separate process, as an operator runs it) sees what `serve` publishes. With
Redis, a receipt on the `receipts` stream reaches the run record and the pub/sub topic.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from core.backends.redis.bus import RedisBus
from core.backends.sql.bus import SqliteBus
from core.backends.sql.store import SqlStore
from core.bus.names import EVENTS, NOTIFICATIONS, RECEIPTS
from core.clock import utc_now
from core.envelopes import (
    Address,
    EventEnvelope,
    NotificationFailed,
    NotificationSent,
    NotificationSource,
    Outbound,
    Receipt,
)
from core.notifications import ReceiptDesk
from core.readiness import Readiness
from core.redact import Redactor
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, ScheduleRun

PATIENCE = 10.0
SHARED = frozenset({NOTIFICATIONS})


def _failed(text: str) -> NotificationFailed:
    return NotificationFailed(
        address=Address(platform="telegram", chat="42"),
        source=NotificationSource(kind="hook", name="ci"),
        text=text,
        status="dead_lettered",
        reason="telegram unreachable",
    )


async def test_a_shared_topic_reaches_another_bus_on_the_file(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    publisher = await SqliteBus.open(path, shared_topics=SHARED)
    reader = await SqliteBus.open(path, shared_topics=SHARED)
    try:
        early = _failed("before anyone listened")
        await publisher.publish(NOTIFICATIONS, early)
        subscription = await reader.subscribe(NOTIFICATIONS)
        local = await publisher.subscribe(NOTIFICATIONS)
        events = await reader.subscribe(EVENTS)
        sent = [_failed("first"), _failed("second")]
        for event in sent:
            await publisher.publish(NOTIFICATIONS, event)
        # Topics not named shared stay in their process.
        await publisher.publish(EVENTS, EventEnvelope(name="x", session_id="s", run_id="r"))

        async with asyncio.timeout(PATIENCE):
            seen = [await anext(aiter(subscription)), await anext(aiter(subscription))]
            seen_here = [await anext(aiter(local)), await anext(aiter(local))]
        assert seen == sent == seen_here
        await subscription.aclose()
        assert [e async for e in subscription] == []
        await events.aclose()
        assert [e async for e in events] == []
    finally:
        await publisher.close()
        await reader.close()


async def test_switchboard_events_prints_the_notifications_topic(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data)}
    env.pop("REDIS_URL", None)
    bus = await SqliteBus.open(data / "switchboard.db", shared_topics=SHARED)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots",
        "events",
        "--topic",
        "notifications",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        line = b""
        async with asyncio.timeout(PATIENCE * 2):
            # The process subscribes some time after it starts; publish until it has seen one.
            while b"notification.failed" not in line:
                await bus.publish(NOTIFICATIONS, _failed("nightly build broke"))
                try:
                    async with asyncio.timeout(0.5):
                        line = await process.stdout.readline()
                except TimeoutError:
                    continue
        text = line.decode()
        assert "telegram:42 hook:ci dead_lettered: telegram unreachable" in text
        assert "nightly build broke" in text
    finally:
        if process.returncode is None:
            process.terminate()
        await process.communicate()  # reads both pipes to their end: the transport closes
        await bus.close()


async def test_with_redis_a_receipt_lands_on_the_run_and_the_topic(
    redis_url: str, tmp_path: Path
) -> None:
    bus = await RedisBus.connect(redis_url)
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'records.db'}")
    try:
        book = ScheduleBook(store)
        now = utc_now()
        schedule = await book.create(
            cadence=IntervalCadence(seconds=3600, start=now),
            prompt="Anything?",
            deliver_to=Address(platform="telegram", chat="42"),
            owner="cli",
        )
        await store.save_run(
            ScheduleRun(
                id="r1", schedule_id=schedule.id, due_at=now, started_at=now, delivery="pending"
            )
        )
        desk = ReceiptDesk(
            bus=bus, store=store, book=book, redactor=Redactor(), readiness=Readiness()
        )
        source = NotificationSource(kind="schedule", name=schedule.id, run_id="r1")
        outbound = Outbound(
            kind="notification", address=schedule.deliver_to, text="Yes.", source=source
        )
        watching = await bus.subscribe(NOTIFICATIONS)
        running = asyncio.create_task(desk.run())
        try:
            await bus.enqueue(
                RECEIPTS, Receipt(outbound=outbound, status="delivered", platform_message_id="77")
            )
            async with asyncio.timeout(PATIENCE):
                event = await anext(aiter(watching))
        finally:
            await desk.stop()
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await watching.aclose()

        assert isinstance(event, NotificationSent)
        assert (event.platform_message_id, event.source.name) == ("77", schedule.id)
        [run] = await store.list_runs(schedule.id)
        assert (run.delivery, run.delivery_detail) == ("delivered", "77")
    finally:
        await store.close()
        await bus.close()
