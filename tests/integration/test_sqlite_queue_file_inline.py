"""The embedded deployment's queue file runs its statements on the event loop's thread
(`core/backends/sql/_inline_file.py`, as the store does: decision 0028), and what could wait
long does not hold the loop: a write that finds the write lock taken waits for it in a thread
while the loop goes on, and one cancelled meanwhile leaves no transaction open.

A real SQLite file; the lock is held by a plain `sqlite3` connection of the test, as the
store's connection to the same data file in `serve`, or another process, would hold it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from core.backends.sql.bus import SqliteBus
from core.envelopes import Address, Inbound


def _inbound(text: str) -> Inbound:
    return Inbound(address=Address(platform="telegram", chat="1"), user_id="u1", text=text)


async def test_the_queue_file_keeps_no_connection_thread(tmp_path: Path) -> None:
    # An aiosqlite connection is a thread of its own that runs every statement; the queue
    # file has none. Only the loop's default executor (commits that wrote) may start threads.
    before = set(threading.enumerate())
    bus = await SqliteBus.open(tmp_path / "queues.db")
    try:
        await bus.enqueue("inbound", _inbound("a"))
        delivery = await bus.receive("inbound", consumer="c", timeout=1)
        assert delivery is not None
        await delivery.ack()
        started = [
            thread.name
            for thread in threading.enumerate()
            if thread not in before and not thread.name.startswith("asyncio_")
        ]
        assert started == []
    finally:
        await bus.close()


async def test_a_write_waits_for_the_lock_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "queues.db"
    bus = await SqliteBus.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock, held by another connection
        writing = asyncio.create_task(bus.enqueue("inbound", _inbound("a")))
        # The task runs until it waits; with the loop held, it would end only after the busy
        # timeout, failing ("database is locked").
        await asyncio.sleep(0)
        assert not writing.done()
        other.execute("COMMIT")
        await writing
        delivery = await bus.receive("inbound", consumer="c", timeout=1)
        assert delivery is not None
        assert isinstance(delivery.envelope, Inbound)
        assert delivery.envelope.text == "a"
    finally:
        other.close()
        await bus.close()


async def test_a_write_cancelled_while_it_waits_for_the_lock_leaves_no_transaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "queues.db"
    bus = await SqliteBus.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.create_task(bus.enqueue("inbound", _inbound("cancelled")))
        await asyncio.sleep(0)
        writing.cancel()
        other.execute("COMMIT")  # the waiting BEGIN may now take the lock; it is undone
        await asyncio.gather(writing, return_exceptions=True)
        # Nothing of the cancelled write stayed, and the file takes writes again.
        await bus.enqueue("inbound", _inbound("next"))
        delivery = await bus.receive("inbound", consumer="c", timeout=1)
        assert delivery is not None
        assert isinstance(delivery.envelope, Inbound)
        assert delivery.envelope.text == "next"
        other.execute("BEGIN IMMEDIATE")  # no transaction of the bus holds the lock
        other.execute("ROLLBACK")
    finally:
        other.close()
        await bus.close()
