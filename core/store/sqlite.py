"""`SqliteStore`: the embedded `Store`, one SQLite file in the data directory, on aiosqlite.

One connection serves every coroutine of the process. aiosqlite already runs statements one at
a time on its own thread; an `asyncio.Lock` on top keeps the statements of one transaction
together, so concurrent `append_message` calls cannot interleave their `max(seq) + 1`.

The SQL of schedules and their runs lives in `core/store/_sqlite_schedules.py`, that of
remembered facts in `core/store/_sqlite_facts.py`, compaction summaries in
`core/store/_sqlite_summaries.py`, turn checkpoints in `core/store/_sqlite_checkpoints.py`.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from uuid import uuid4

import aiosqlite
from pydantic import ValidationError

from core.checkpoints import Checkpoint, CheckpointStatus
from core.clock import utc_now
from core.envelopes import Address
from core.errors import StoreError
from core.facts import MemoryFact, MemoryQuery
from core.messages import Message, Usage
from core.scheduling.models import Schedule, ScheduleRun
from core.store import _sqlite_checkpoints as _checkpoints
from core.store import _sqlite_facts as _memory
from core.store import _sqlite_schedules as _schedules
from core.store import _sqlite_summaries as _summaries
from core.store._shared import check_aware, check_limit, from_utc_text, utc_text
from core.store.base import CompactionSummary, CostEntry, CostSummary, Fence, SessionRecord

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

_MEMORY: Final = ":memory:"

# One entry per schema version: the statements that migrate version i to i + 1. Later issues
# append to this tuple; `PRAGMA user_version` records how far a database file has come.
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """,
        "CREATE INDEX sessions_by_key ON sessions (key, created_at)",
        "CREATE INDEX sessions_by_updated ON sessions (updated_at)",
        """
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
        "CREATE TABLE processed (key TEXT PRIMARY KEY, at TEXT NOT NULL)",
    ),
    (
        # The cost ledger: one row per provider call. A NULL cost means "no known price".
        """
        CREATE TABLE costs (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            run_id TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            cost_usd REAL,
            at TEXT NOT NULL
        )
        """,
        "CREATE INDEX costs_by_session ON costs (session_id)",
    ),
    (
        # Schedules and their runs. `body` (the model's JSON) is the record; the other columns
        # repeat parts of it for queries. Times are fixed-width UTC text, so they sort.
        """
        CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat TEXT NOT NULL,
            thread TEXT,
            status TEXT NOT NULL,
            next_run_at TEXT,
            created_at TEXT NOT NULL,
            body TEXT NOT NULL
        )
        """,
        "CREATE INDEX schedules_by_due ON schedules (status, next_run_at)",
        "CREATE INDEX schedules_by_owner ON schedules (owner)",
        """
        CREATE TABLE schedule_runs (
            id TEXT PRIMARY KEY,
            schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
            started_at TEXT NOT NULL,
            body TEXT NOT NULL
        )
        """,
        "CREATE INDEX schedule_runs_by_start ON schedule_runs (schedule_id, started_at)",
    ),
    # Remembered facts and their full-text index.
    _memory.MIGRATION,
    # Compaction summaries.
    _summaries.MIGRATION,
    # Turn checkpoints, for recovery after a crash.
    _checkpoints.MIGRATION,
)

SCHEMA_VERSION: Final = len(_MIGRATIONS)

# Every ledger summary reads the same aggregates, in the order `_summary_from_row` expects.
# COALESCE: SUM over no rows (or only NULL costs) is NULL, and an empty ledger costs 0.
_COST_AGGREGATES: Final = (
    "COUNT(*),"
    " COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
    " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
    " COALESCE(SUM(cost_usd), 0.0), COALESCE(SUM(cost_usd IS NULL), 0)"
)

# Every read of a session fills `message_count`, so all of them share this column list.
_SESSION_COLUMNS: Final = (
    "s.id, s.key, s.created_at, s.updated_at,"
    " (SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id)"
)


class SqliteStore:
    """The `Store` on a SQLite file (or `":memory:"`), opened with `await SqliteStore.open(...)`.

    Every write commits before the awaited call returns.
    """

    def __init__(self, db: aiosqlite.Connection, *, clock: Callable[[], datetime]) -> None:
        """Wrap an open, migrated connection; use `SqliteStore.open` instead."""
        self._db = db
        self._clock = clock
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls, path: Path | str, *, clock: Callable[[], datetime] = utc_now
    ) -> SqliteStore:
        """Open (creating it and its parent directories if needed) and migrate the database."""
        target = str(path)
        try:
            if target != _MEMORY:
                await asyncio.to_thread(Path(target).parent.mkdir, parents=True, exist_ok=True)
            # Autocommit mode: transactions are begun and ended explicitly by `_write`.
            db = await aiosqlite.connect(target, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the SQLite store at {target}: {exc}") from exc
        try:
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA foreign_keys = ON")
            await db.execute("PRAGMA busy_timeout = 5000")
            await _migrate(db, target)
        except BaseException as exc:
            await db.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot prepare the SQLite store at {target}: {exc}") from exc
            raise
        return cls(db, clock=clock)

    async def close(self) -> None:
        """Close the connection; later calls raise `StoreError`."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            try:
                await self._db.close()
            except sqlite3.Error as exc:
                raise StoreError(f"closing the SQLite store failed: {exc}") from exc

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        async with self._write(f"create a session for {key!r}"):
            return await self._insert_session(key)

    async def current_session(self, key: str) -> SessionRecord:
        """The newest session for `key`, created if the key has none yet."""
        async with self._write(f"find the current session of {key!r}"):
            found = await self._newest_session(key)
            return found if found is not None else await self._insert_session(key)

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
        self, session_id: str, message: Message, *, fence: Fence | None = None
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        Raises `StoreError` for an unknown session. `fence` is not checked: an SQLite file
        belongs to one process, whose worker serializes each session's turns itself.
        """
        body = _encode_body(message)
        async with self._write(f"append a message to session {session_id!r}"):
            now = self._now()
            updated = await self._db.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (utc_text(now), session_id)
            )
            if updated.rowcount != 1:
                raise StoreError(f"cannot append a message: no session has id {session_id!r}")
            rows = await self._db.execute_fetchall(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?",
                (session_id,),
            )
            seq = int(next(iter(rows))[0])
            await self._db.execute(
                "INSERT INTO messages (session_id, seq, role, body, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, seq, message.role, body, utc_text(now)),
            )
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
            await _summaries.save_summary(self._db, session_id, summary)

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        async with self._read(f"read the summary of session {session_id!r}"):
            return await _summaries.latest_summary(self._db, session_id)

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was."""
        async with self._write(f"mark {key!r} processed"):
            cursor = await self._db.execute(
                "INSERT OR IGNORE INTO processed (key, at) VALUES (?, ?)",
                (key, utc_text(self._now())),
            )
            return cursor.rowcount == 1

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before."""
        async with self._read(f"check whether {key!r} was processed"):
            rows = await self._db.execute_fetchall("SELECT 1 FROM processed WHERE key = ?", (key,))
        return next(iter(rows), None) is not None

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger.

        Raises `StoreError` for an unknown session or a naive `entry.at`, and `ValueError` for
        a cost that is not a finite number (SQLite would store NaN as NULL: "unpriced").
        """
        if entry.cost_usd is not None and not math.isfinite(entry.cost_usd):
            raise ValueError(f"cost_usd must be a finite number, got {entry.cost_usd!r}")
        if entry.at.tzinfo is None:
            raise StoreError("a cost entry's `at` is a naive datetime; it must be aware")
        usage = entry.usage
        async with self._write(f"record a cost for session {entry.session_id!r}"):
            rows = await self._db.execute_fetchall(
                "SELECT 1 FROM sessions WHERE id = ?", (entry.session_id,)
            )
            if next(iter(rows), None) is None:
                raise StoreError(f"cannot record a cost: no session has id {entry.session_id!r}")
            await self._db.execute(
                "INSERT INTO costs (session_id, run_id, provider, model, input_tokens,"
                " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.session_id,
                    entry.run_id,
                    entry.provider,
                    entry.model,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    entry.cost_usd,
                    utc_text(entry.at),
                ),
            )

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None.

        A session without ledger entries (or an unknown one) sums to zero.
        """
        query = f"SELECT {_COST_AGGREGATES} FROM costs"
        params: tuple[str, ...] = ()
        if session_id is not None:
            # A separate WHERE (not `? IS NULL OR ...`) so SQLite can use costs_by_session.
            query += " WHERE session_id = ?"
            params = (session_id,)
        whose = "all sessions" if session_id is None else f"session {session_id!r}"
        async with self._read(f"sum the costs of {whose}"):
            rows = await self._db.execute_fetchall(query, params)
        return _summary_from_row(session_id, next(iter(rows)))

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first.

        Only sessions with ledger entries appear. "Most recently charged" is the latest entry
        `at`; on a tie the session whose newest entry was recorded last comes first.
        """
        check_limit(limit)
        async with self._read("sum costs by session"):
            rows = await self._db.execute_fetchall(
                f"SELECT session_id, {_COST_AGGREGATES} FROM costs GROUP BY session_id"
                " ORDER BY MAX(at) DESC, MAX(id) DESC LIMIT ?",
                (limit,),
            )
        return [_summary_from_row(row[0], row[1:]) for row in rows]

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id (its runs stay).

        Raises `StoreError` when any of its times is naive.
        """
        check_aware(schedule, f"schedule {schedule.id!r}")
        async with self._write(f"save schedule {schedule.id!r}"):
            await _schedules.save_schedule(self._db, schedule)

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        async with self._read(f"read schedule {schedule_id!r}"):
            return await _schedules.get_schedule(self._db, schedule_id)

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first; `deliver_to.bot` is ignored."""
        async with self._read("list schedules"):
            return await _schedules.list_schedules(self._db, owner=owner, deliver_to=deliver_to)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        async with self._write(f"delete schedule {schedule_id!r}"):
            return await _schedules.delete_schedule(self._db, schedule_id)

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first.

        Equal due times go oldest schedule first. Raises `StoreError` for a naive `now`.
        """
        check_limit(limit)
        if now.utcoffset() is None:
            raise StoreError("`now` is a naive datetime; it must be aware")
        async with self._read("find due schedules"):
            return await _schedules.due_schedules(self._db, now, limit)

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id.

        Raises `StoreError` for an unknown schedule or a naive time.
        """
        check_aware(run, f"run {run.id!r}")
        async with self._write(f"save run {run.id!r} of schedule {run.schedule_id!r}"):
            await _schedules.save_run(self._db, run)

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        check_limit(limit)
        async with self._read(f"list the runs of schedule {schedule_id!r}"):
            return await _schedules.list_runs(self._db, schedule_id, limit)

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        if keep < 0:
            raise ValueError(f"keep must not be negative, got {keep}")
        async with self._write(f"prune the runs of schedule {schedule_id!r}"):
            return await _schedules.prune_runs(self._db, schedule_id, keep)

    async def remember_fact(self, fact: MemoryFact) -> None:
        """Store a fact in its scope; the same fact again changes nothing.

        Raises `StoreError` for another fact with an id the scope holds, or a naive time.
        """
        check_aware(fact, f"fact {fact.id!r}")
        async with self._write(f"remember fact {fact.id!r} of {fact.scope!r}"):
            await _memory.remember_fact(self._db, fact)

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` best matching `query` (by `bm25`), or the newest without terms."""
        check_limit(limit)
        async with self._read(f"search the facts of {scope!r}"):
            return await _memory.search_facts(self._db, scope, MemoryQuery.parse(query), limit)

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest first."""
        check_limit(limit)
        async with self._read(f"list the facts of {scope!r}"):
            return await _memory.list_facts(self._db, scope, limit)

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        async with self._write(f"forget fact {fact_id!r} of {scope!r}"):
            return await _memory.forget_fact(self._db, scope, fact_id)

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
        async with self._write(f"save checkpoint {checkpoint.run_key!r}"):
            await _checkpoints.save_checkpoint(self._db, checkpoint)

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        async with self._read(f"read checkpoint {run_key!r}"):
            return await _checkpoints.get_checkpoint(self._db, run_key)

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        async with self._read("list incomplete checkpoints"):
            return await _checkpoints.incomplete_checkpoints(self._db, older_than)

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status; False if there is none."""
        async with self._write(f"finish checkpoint {run_key!r}"):
            return await _checkpoints.finish_checkpoint(self._db, run_key, status, self._now())

    @asynccontextmanager
    async def _read(self, action: str) -> AsyncIterator[None]:
        # Reads take the lock too: on a shared connection they would otherwise see the
        # uncommitted half of a write transaction that may still roll back.
        async with self._lock, _translated(action):
            self._ensure_open()
            yield

    @asynccontextmanager
    async def _write(self, action: str) -> AsyncIterator[None]:
        """One write transaction, committed on success and rolled back on any exception."""
        async with self._lock, _translated(action):
            self._ensure_open()
            try:
                # IMMEDIATE takes the file's write lock now, so another process cannot slip a
                # write between our read of max(seq) and our insert. BEGIN sits inside the
                # `try`: if we are cancelled while it is queued, it still runs, and the
                # rollback queued behind it must undo it.
                await self._db.execute("BEGIN IMMEDIATE")
                yield
                await self._db.commit()
            except BaseException:
                # A no-op when no transaction is open (BEGIN or COMMIT itself failed).
                await self._db.rollback()
                raise

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError("the SQLite store is closed")

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)

    async def _insert_session(self, key: str) -> SessionRecord:
        now = self._now()
        record = SessionRecord(id=uuid4().hex[:12], key=key, created_at=now, updated_at=now)
        await self._db.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (record.id, key, utc_text(now), utc_text(now)),
        )
        return record

    async def _newest_session(self, key: str) -> SessionRecord | None:
        rows = await self._db.execute_fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions AS s WHERE s.key = ?"
            " ORDER BY s.created_at DESC, s.rowid DESC LIMIT 1",
            (key,),
        )
        return _first_session(rows)


async def _migrate(db: aiosqlite.Connection, target: str) -> None:
    """Bring the schema to `SCHEMA_VERSION`, one committed transaction per version."""
    rows = await db.execute_fetchall("PRAGMA user_version")
    version = int(next(iter(rows))[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the SQLite store at {target} has schema version {version}; this Switchboard"
            f" knows versions up to {SCHEMA_VERSION}"
        )
    for number, statements in enumerate(_MIGRATIONS[version:], start=version + 1):
        try:
            await db.execute("BEGIN IMMEDIATE")
            for statement in statements:
                await db.execute(statement)
            # PRAGMA takes no parameters; `number` is an int from our own table.
            await db.execute(f"PRAGMA user_version = {number:d}")
            await db.commit()
        except BaseException:
            await db.rollback()
            raise


@asynccontextmanager
async def _translated(action: str) -> AsyncIterator[None]:
    """Turn driver failures into `StoreError`s that say what the store was doing."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite store could not {action}: {exc}") from exc
    except ValidationError as exc:
        raise StoreError(f"SQLite store could not {action}: stored data is invalid: {exc}") from exc


def _session_from_row(row: sqlite3.Row | tuple[Any, ...]) -> SessionRecord:
    session_id, key, created_at, updated_at, message_count = row
    return SessionRecord(
        id=session_id,
        key=key,
        created_at=from_utc_text(created_at),
        updated_at=from_utc_text(updated_at),
        message_count=message_count,
    )


def _summary_from_row(session_id: str | None, row: sqlite3.Row | tuple[Any, ...]) -> CostSummary:
    calls, input_tokens, output_tokens, cache_read, cache_write, cost_usd, unpriced = row
    return CostSummary(
        session_id=session_id,
        calls=calls,
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        ),
        cost_usd=cost_usd,
        unpriced_calls=unpriced,
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
