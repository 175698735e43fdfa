"""The SQLite mailboxes' reads take no write lock (`SqliteQueueFile.read`): a turn's look
for messages behind its head, and the look into a mailbox when a claim is released, go on
while another connection writes to the file (decision 0028: each is one statement, not a
`BEGIN IMMEDIATE` ... `COMMIT` transaction of three hand-offs).

A real SQLite file; the write lock is held by a plain `sqlite3` connection of the test, as
another process on the data file would hold it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from core.backends.sql.mailboxes import SqliteMailboxes
from core.envelopes import Address, Inbound


def _inbound(text: str) -> Inbound:
    return Inbound(address=Address(platform="telegram", chat="1"), user_id="u1", text=text)


async def test_reads_go_on_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "queues.db"
    mailboxes = await SqliteMailboxes.open(path)
    first, second = _inbound("a"), _inbound("b")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await mailboxes.put(first)
        await mailboxes.put(second)
        claim = await mailboxes.claim(first.session_key, owner="w1")
        assert claim is not None
        assert await claim.head() == first
        other.execute("BEGIN IMMEDIATE")  # the write lock, held by another connection
        assert [inbound.id for inbound in await claim.behind()] == [second.id]
        assert await mailboxes.waiting() == 2
        assert await mailboxes.has_work(first.session_key)
        other.execute("ROLLBACK")
    finally:
        other.close()
        await mailboxes.aclose()
