"""The `ConversationLog` of `SqliteStore`: sessions, messages, compaction summaries, and the
fencing epochs its fenced writes check (`core/fencing.py`).

A session keeps every summary it was given, one per archive marker (`up_to_seq`); requests use
the one with the highest marker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Final

import aiosqlite

from core.errors import StoreError
from core.fencing import Fence, FenceOvertaken
from core.messages import Message
from core.store._shared import check_aware, check_limit, from_utc_text, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.log import CompactionSummary, SessionRecord, new_session_id

__all__ = [
    "FENCES_MIGRATION",
    "REOPENED_MIGRATION",
    "SUMMARIES_MIGRATION",
    "TOUCH_MIGRATION",
    "SqliteLog",
]

SUMMARIES_MIGRATION: Final = (
    """
    CREATE TABLE summaries (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        up_to_seq INTEGER NOT NULL,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, up_to_seq)
    )
    """,
)

# The highest fencing epoch a write was seen with, per session key.
FENCES_MIGRATION: Final = (
    "CREATE TABLE fences (session_key TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
)

# A key whose current session is an earlier one, reopened; `create_session` clears it.
REOPENED_MIGRATION: Final = (
    """
    CREATE TABLE reopened (
        key TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE
    )
    """,
)

# A message stored moves its session's `updated_at` to the message's time, in the statement
# that stores it: an append is then one statement (one trip to aiosqlite's thread, where each
# statement costs a thread hand-over, not a transaction of five).
TOUCH_MIGRATION: Final = (
    """
    CREATE TRIGGER messages_touch_session AFTER INSERT ON messages
    BEGIN
        UPDATE sessions SET updated_at = NEW.created_at WHERE id = NEW.session_id;
    END
    """,
)

# Stores a message at the end of its session (the next seq), unless the session is unknown;
# RETURNING its seq. `_FENCED` adds: unless a newer fencing epoch wrote to the session key.
# Params: role, body, created_at, session id[, session key, epoch].
_APPEND: Final = (
    "INSERT INTO messages (session_id, seq, role, body, created_at)"
    " SELECT s.id, (SELECT COALESCE(MAX(m.seq), 0) + 1 FROM messages AS m"
    " WHERE m.session_id = s.id), ?, ?, ? FROM sessions AS s WHERE s.id = ?"
)
_FENCED: Final = (
    " AND NOT EXISTS (SELECT 1 FROM fences AS f WHERE f.session_key = ? AND f.epoch > ?)"
)
_RETURNING: Final = " RETURNING seq"

# Every read of a session fills `message_count`, so all of them share this column list.
_SESSION_COLUMNS: Final = (
    "s.id, s.key, s.created_at, s.updated_at,"
    " (SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id)"
)


class SqliteLog(SqliteBase):
    """The `ConversationLog` of `SqliteStore`."""

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        async with self._write(f"create a session for {key!r}"):
            await self._db.execute("DELETE FROM reopened WHERE key = ?", (key,))
            return await self._insert_session(key)

    async def current_session(self, key: str, *, new_id: str | None = None) -> SessionRecord:
        """The key's current session (the newest, or the one reopened last), created if the
        key has none yet (with `new_id` as its id when given)."""
        async with self._write(f"find the current session of {key!r}"):
            found = await self._current(key)
            return found if found is not None else await self._insert_session(key, new_id)

    async def find_current_session(self, key: str) -> SessionRecord | None:
        """The key's current session, or None if it has none (nothing is created)."""
        async with self._read(f"find the current session of {key!r}"):
            return await self._current(key)

    async def reopen_session(self, session_id: str) -> SessionRecord | None:
        """Make an earlier session its key's current one again; None if there is none."""
        async with self._write(f"reopen session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                f"SELECT {_SESSION_COLUMNS} FROM sessions AS s WHERE s.id = ?", (session_id,)
            )
            found = _first_session(rows)
            if found is not None:
                await self._db.execute(
                    "INSERT OR REPLACE INTO reopened (key, session_id) VALUES (?, ?)",
                    (found.key, found.id),
                )
            return found

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        async with self._read(f"read session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                f"SELECT {_SESSION_COLUMNS} FROM sessions AS s WHERE s.id = ?", (session_id,)
            )
        return _first_session(rows)

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first."""
        check_limit(limit)
        async with self._read("list sessions"):
            rows = await self._db.execute_fetchall(
                f"SELECT {_SESSION_COLUMNS} FROM sessions AS s"
                " ORDER BY s.updated_at DESC, s.rowid DESC LIMIT ?",
                (limit,),
            )
        return [_session_from_row(row) for row in rows]

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        fence: Fence | None = None,
        receipt: str | None = None,
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        Raises `StoreError` for an unknown session, or for a `fence` older than one a write of
        its session key was seen with (recorded first, then checked by the insert itself).
        `receipt` needs no record here: a call that raised wrote nothing (its transaction
        rolled back), so trying it again cannot store the message twice.
        """
        body = _encode_body(message)
        action = f"append a message to session {session_id!r}"
        now = self._now()
        stored = (message.role, body, utc_text(now), session_id)
        if fence is None:
            async with self._statement(action):
                rows = await self._db.execute_fetchall(_APPEND + _RETURNING, stored)
        else:
            # Two statements, in this order, each atomic: the fence is recorded (for a known
            # session), then the message stored unless a newer fence was recorded. Once a
            # write of a newer claim is stored its fence is, so no older claim writes after
            # it, whichever process the writes come from.
            async with self._statement(action):
                await self._db.execute(
                    "INSERT INTO fences (session_key, epoch)"
                    " SELECT ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)"
                    " ON CONFLICT (session_key) DO UPDATE SET epoch = excluded.epoch"
                    " WHERE excluded.epoch > fences.epoch",
                    (fence.session_key, fence.epoch, session_id),
                )
                rows = await self._db.execute_fetchall(
                    _APPEND + _FENCED + _RETURNING, (*stored, fence.session_key, fence.epoch)
                )
                if not rows:
                    await self._refuse_overtaken(fence)
        if not rows:
            raise _unknown(session_id)
        seq = int(next(iter(rows))[0])
        return message.model_copy(update={"seq": seq, "created_at": now})

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        if limit is not None:
            check_limit(limit)
        async with self._read(f"list the messages of session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT seq, body, created_at FROM messages"
                " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                # SQLite reads a negative LIMIT as "no limit".
                (session_id, after_seq, -1 if limit is None else limit),
            )
        return [
            _decode_body(body, seq=seq, created_at=created_at) for seq, body, created_at in rows
        ]

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary; one with the same `up_to_seq` replaces the stored one.

        Raises `StoreError` for an unknown session or a naive time.
        """
        check_aware(summary, f"the summary of session {session_id!r}")
        async with self._write(f"save a summary of session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            )
            if next(iter(rows), None) is None:
                raise StoreError(f"cannot save a summary: no session has id {session_id!r}")
            await self._db.execute(
                "INSERT INTO summaries (session_id, up_to_seq, text, created_at)"
                " VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id, up_to_seq)"
                " DO UPDATE SET text = excluded.text, created_at = excluded.created_at",
                (session_id, summary.up_to_seq, summary.text, utc_text(summary.created_at)),
            )

    async def summary_and_tail(
        self, session_id: str
    ) -> tuple[CompactionSummary | None, list[Message]]:
        """`latest_summary` and the messages after its marker (all of them without one)."""
        summary = await self.latest_summary(session_id)
        after = summary.up_to_seq if summary else 0
        return summary, await self.list_messages(session_id, after_seq=after)

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        async with self._read(f"read the summary of session {session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT up_to_seq, text, created_at FROM summaries"
                " WHERE session_id = ? ORDER BY up_to_seq DESC LIMIT 1",
                (session_id,),
            )
            for up_to_seq, text, created_at in rows:
                return CompactionSummary(
                    up_to_seq=up_to_seq,
                    text=text,
                    created_at=from_utc_text(created_at),
                )
            return None

    async def delete_session(self, session_id: str) -> bool:
        """Delete the session's record, messages, summaries and reopen mark; keep its costs."""
        async with self._lock, _deleting(self._db, f"delete session {session_id!r}"):
            self._ensure_open()
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("messages", "summaries", "reopened"):
                    await self._db.execute(
                        f"DELETE FROM {table} WHERE session_id = ?",
                        (session_id,),
                    )
                deleted = await self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                await self._db.commit()
            except BaseException:
                await self._db.rollback()
                raise
        return deleted.rowcount == 1

    async def _refuse_overtaken(self, fence: Fence) -> None:
        """Raise `FenceOvertaken` if a newer epoch than `fence`'s wrote to its session key."""
        rows = await self._db.execute_fetchall(
            "SELECT epoch FROM fences WHERE session_key = ?", (fence.session_key,)
        )
        seen = next((int(row[0]) for row in rows), 0)
        if fence.epoch < seen:
            raise FenceOvertaken(
                f"cannot write to {fence.session_key!r}: its claim was overtaken"
                f" (epoch {fence.epoch} < {seen})"
            )

    async def _insert_session(self, key: str, session_id: str | None = None) -> SessionRecord:
        now = self._now()
        record = SessionRecord(
            id=session_id or new_session_id(), key=key, created_at=now, updated_at=now
        )
        await self._db.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (record.id, key, utc_text(now), utc_text(now)),
        )
        return record

    async def _current(self, key: str) -> SessionRecord | None:
        """The key's reopened session, else its newest (one statement)."""
        rows = await self._db.execute_fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions AS s WHERE s.id = COALESCE("
            "(SELECT r.session_id FROM reopened AS r WHERE r.key = ?),"
            " (SELECT n.id FROM sessions AS n WHERE n.key = ?"
            " ORDER BY n.created_at DESC, n.rowid DESC LIMIT 1))",
            (key, key),
        )
        return _first_session(rows)


@asynccontextmanager
async def _deleting(db: aiosqlite.Connection, action: str) -> AsyncIterator[None]:
    """Foreign keys off around a session's deletion: the ledger's rows reference the session
    with ON DELETE CASCADE, and the spending they record must outlive the conversation. The
    pragma cannot change inside a transaction, so it wraps the whole of it (under the lock)."""
    try:
        await db.execute("PRAGMA foreign_keys = OFF")
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"cannot {action}: {exc}") from exc
    finally:
        await db.execute("PRAGMA foreign_keys = ON")


def _session_from_row(row: sqlite3.Row | tuple[Any, ...]) -> SessionRecord:
    session_id, key, created_at, updated_at, message_count = row
    return SessionRecord(
        id=session_id,
        key=key,
        created_at=from_utc_text(created_at),
        updated_at=from_utc_text(updated_at),
        message_count=message_count,
    )


def _first_session(rows: Iterable[sqlite3.Row]) -> SessionRecord | None:
    for row in rows:
        return _session_from_row(row)
    return None


def _encode_body(message: Message) -> str:
    """The message as JSON; `seq` and `created_at` live in their own columns."""
    return message.model_dump_json(exclude={"seq", "created_at"})


def _decode_body(body: str, *, seq: int, created_at: str) -> Message:
    message = Message.model_validate_json(body)
    return message.model_copy(update={"seq": seq, "created_at": from_utc_text(created_at)})


def _unknown(session_id: str) -> StoreError:
    return StoreError(f"cannot append a message: no session has id {session_id!r}")
