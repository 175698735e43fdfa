"""`SqliteMailboxes`: the embedded deployment's durable mailboxes, rows in the SQLite data file.

The embedded deployment's one durable queue for inbound work: an item is in the file before
its producer (the adapter, the scheduler, the hooks listener) goes on, and leaves it only when
its turn is done, so a crash or restart finds every unfinished item still waiting (the
worker's sweep picks the sessions up again). Claims and wakes are held in this process: the
embedded deployment has one worker; work another process puts in the file (`switchboard
notify --prompt`) is found by the sweep. Claim epochs are floored by the
clock, so a restarted process still outbids the epochs the store kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from core.backends.sql.bus import SqliteQueueFile
from core.envelopes import Inbound, decode, encode
from core.errors import BusError
from core.mailbox.base import BEHIND_LIMIT, Claim, ClaimState, LocalWakes, is_plain

__all__ = ["SqliteMailboxes"]

log = logging.getLogger(__name__)

_SCHEMA: Final = (
    """
    CREATE TABLE IF NOT EXISTS mailbox_items (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key TEXT NOT NULL,
        inbound_id TEXT NOT NULL,
        data BLOB NOT NULL,
        UNIQUE (session_key, inbound_id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS mailbox_items_by_session ON mailbox_items (session_key, seq)",
)


class _SqliteClaim(ClaimState):
    def __init__(self, boxes: SqliteMailboxes, session_key: str, epoch: int) -> None:
        super().__init__(session_key, epoch)
        self._boxes = boxes

    async def head(self) -> Inbound | None:
        file = self._boxes.file
        while True:
            async with file.write("read a mailbox") as db:
                rows = await db.execute_fetchall(
                    "SELECT seq, data FROM mailbox_items WHERE session_key = ?"
                    " ORDER BY seq LIMIT 1",
                    (self._key,),
                )
                found = next(iter(rows), None)
                if found is None:
                    return None
                try:
                    envelope = decode(bytes(found[1]))
                except BusError as exc:
                    log.error("dropping an unreadable mailbox entry of %s: %s", self._key, exc)
                    envelope = None
                if isinstance(envelope, Inbound):
                    return envelope
                await db.execute("DELETE FROM mailbox_items WHERE seq = ?", (int(found[0]),))

    async def done(self, inbound: Inbound) -> None:
        async with self._boxes.file.write("finish a mailbox item") as db:
            await db.execute(
                "DELETE FROM mailbox_items WHERE session_key = ? AND inbound_id = ?",
                (self._key, inbound.id),
            )

    async def behind(
        self, limit: int = BEHIND_LIMIT, *, accept: Callable[[Inbound], bool] = is_plain
    ) -> list[Inbound]:
        async with self._boxes.file.read("read a mailbox") as db:
            rows = await db.execute_fetchall(
                "SELECT data FROM mailbox_items WHERE session_key = ?"
                " ORDER BY seq LIMIT ? OFFSET 1",
                (self._key, limit),
            )
        return _plain_run(self._key, [bytes(row[0]) for row in rows], accept)

    async def release(self) -> bool:
        self._boxes.held.discard(self._key)
        return await self._boxes.has_work(self._key)


def _plain_run(
    session_key: str, items: list[bytes], accept: Callable[[Inbound], bool]
) -> list[Inbound]:
    """The plain messages (`accept`) among encoded `items` up to the first that is not one (one that
    cannot be read stops the run too: the head's reading drops it in its turn)."""
    found: list[Inbound] = []
    for raw in items:
        try:
            envelope = decode(raw)
        except BusError as exc:
            log.warning("an unreadable mailbox entry of %s stops a join: %s", session_key, exc)
            break
        if not isinstance(envelope, Inbound) or not accept(envelope):
            break
        found.append(envelope)
    return found


class SqliteMailboxes:
    """Mailboxes in the SQLite data file, claims in this process (the embedded deployment)."""

    def __init__(self, file: SqliteQueueFile) -> None:
        """Wrap an open queue file; use `SqliteMailboxes.open` instead."""
        self.file = file
        self.held: set[str] = set()
        self._epochs: dict[str, int] = {}
        self._wakes = LocalWakes()

    @classmethod
    async def open(cls, path: Path | str) -> SqliteMailboxes:
        """The mailboxes kept in the SQLite file at `path`."""
        return cls(await SqliteQueueFile.open(path, _SCHEMA))

    async def put(self, inbound: Inbound) -> None:
        """Add work in arrival order (committed on return); an item already waiting is kept
        once (a crashed turn resumed while its item is still in the mailbox)."""
        async with self.file.write("add to a mailbox") as db:
            await db.execute(
                "INSERT OR IGNORE INTO mailbox_items (session_key, inbound_id, data)"
                " VALUES (?, ?, ?)",
                (inbound.session_key, inbound.id, encode(inbound)),
            )
        self._wakes.wake(inbound.session_key)

    async def woken(self, within: float) -> str | None:
        """The next session this process put work for, or None after `within` seconds."""
        return await self._wakes.next(within)

    async def waiting(self) -> int:
        """How many items wait in the file's mailboxes."""
        async with self.file.read("count mailbox items") as db:
            rows = await db.execute_fetchall("SELECT COUNT(*) FROM mailbox_items")
        return int(next(iter(rows))[0])

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        """The session's claim unless this process holds it already."""
        if session_key in self.held:
            return None
        self.held.add(session_key)
        # Floored by the clock: a restarted process still outbids the epochs a store kept.
        epoch = max(self._epochs.get(session_key, 0) + 1, time.time_ns() // 1_000)
        self._epochs[session_key] = epoch
        return _SqliteClaim(self, session_key, epoch)

    async def pending(self) -> list[str]:
        """Sessions with waiting work that nobody holds (claims are this process's)."""
        async with self.file.read("list mailboxes") as db:
            rows = await db.execute_fetchall(
                "SELECT DISTINCT session_key FROM mailbox_items ORDER BY session_key"
            )
        return [str(row[0]) for row in rows if str(row[0]) not in self.held]

    async def has_work(self, session_key: str) -> bool:
        """Whether the session's mailbox holds anything."""
        async with self.file.read("look into a mailbox") as db:
            rows = await db.execute_fetchall(
                "SELECT 1 FROM mailbox_items WHERE session_key = ? LIMIT 1", (session_key,)
            )
        return bool(list(rows))

    async def aclose(self) -> None:
        """Close the connection."""
        await self.file.close()
