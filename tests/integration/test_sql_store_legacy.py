"""A data file written by the old embedded store (`SqliteStore`, schema version 12) opens
under `SqlStore` and is converted with nothing lost.

The file and what the old store read from it are `tests/fixtures/sqlite_store_v12.*`
(`tests/fixtures/sqlite_store_v12.py` says how they were made).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from core.backends.sql.store import SqlReplyRecords, SqlStore, head_revision, sqlite_url
from core.envelopes import Address
from core.facts import MemoryFact
from core.messages import Message, Usage
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store import CostEntry
from tests.fixtures.sqlite_store_v12 import DB, EXPECTED, read_back


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "switchboard.db"
    shutil.copyfile(DB, target)
    return target


async def test_an_old_stores_file_reads_back_every_record_under_the_sql_store(
    tmp_path: Path,
) -> None:
    path = _copy(tmp_path)
    url = sqlite_url(path)
    store = await SqlStore.open(url)
    replies = await SqlReplyRecords.open(url)
    try:
        got = json.loads(json.dumps(await read_back(store, replies)))
    finally:
        await replies.close()
        await store.close()

    assert got == json.loads(EXPECTED.read_text(encoding="utf-8"))


async def test_the_converted_file_is_at_the_newest_revision_and_keeps_its_queues(
    tmp_path: Path,
) -> None:
    path = _copy(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE bus_entries (id TEXT PRIMARY KEY)")
        db.execute("INSERT INTO bus_entries VALUES ('queued')")
    db.close()
    store = await SqlStore.open(sqlite_url(path))
    await store.close()
    # Opened again: already converted, nothing to do.
    store = await SqlStore.open(sqlite_url(path))
    try:
        assert [s.id for s in await store.list_sessions()] != []
    finally:
        await store.close()

    db = sqlite3.connect(path)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
        queued = db.execute("SELECT id FROM bus_entries").fetchall()
    finally:
        db.close()
    assert revision == head_revision()
    assert not [name for name in tables if name.startswith("legacy_")]
    assert queued == [("queued",)]


# The tables of the old store's first schema versions as they shipped, frozen here: files of
# every version convert, not only those of the last one (columns are copied by name).
_V1_SCHEMA = (
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, key TEXT NOT NULL,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
    "CREATE INDEX sessions_by_key ON sessions (key, created_at)",
    "CREATE INDEX sessions_by_updated ON sessions (updated_at)",
    "CREATE TABLE messages ("
    " session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, role TEXT NOT NULL, body TEXT NOT NULL,"
    " created_at TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    "CREATE TABLE processed (key TEXT PRIMARY KEY, at TEXT NOT NULL)",
)
# What version 2 added (the cost ledger).
_V2_SCHEMA = (
    *_V1_SCHEMA,
    "CREATE TABLE costs (id INTEGER PRIMARY KEY,"
    " session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
    " run_id TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,"
    " input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,"
    " cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,"
    " cost_usd REAL, at TEXT NOT NULL)",
    "CREATE INDEX costs_by_session ON costs (session_id)",
)
# What version 3 added (schedules and their runs).
_V3_SCHEMA = (
    *_V2_SCHEMA,
    "CREATE TABLE schedules (id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " platform TEXT NOT NULL, chat TEXT NOT NULL, thread TEXT, status TEXT NOT NULL,"
    " next_run_at TEXT, created_at TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX schedules_by_due ON schedules (status, next_run_at)",
    "CREATE INDEX schedules_by_owner ON schedules (owner)",
    "CREATE TABLE schedule_runs (id TEXT PRIMARY KEY,"
    " schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,"
    " started_at TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX schedule_runs_by_start ON schedule_runs (schedule_id, started_at)",
)
_T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
_STAMP = "2025-03-01T12:00:00.000000+00:00"


def _old_file(path: Path, version: int, schema: tuple[str, ...], rows: list[str]) -> None:
    with sqlite3.connect(path) as db:
        for statement in (*schema, *rows):
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
    db.close()


def _cost(session_id: str, cost_usd: float) -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="run-2",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=cost_usd,
        at=_T0,
    )


def _schedule() -> Schedule:
    return Schedule(
        id="sched-1",
        cadence=IntervalCadence(seconds=3600, start=_T0),
        prompt="Anything new?",
        deliver_to=Address(platform="telegram", chat="42"),
        owner="telegram:7",
        next_run_at=_T0,
        created_at=_T0,
        updated_at=_T0,
    )


async def test_a_file_of_the_first_version_converts_with_its_records(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    hello = Message.user("hello from v1").model_dump_json(exclude={"seq", "created_at"})
    _old_file(
        path,
        1,
        _V1_SCHEMA,
        [
            f"INSERT INTO sessions VALUES ('oldsession01', 'telegram:42', '{_STAMP}', '{_STAMP}')",
            f"INSERT INTO messages VALUES ('oldsession01', 1, 'user', '{hello}', '{_STAMP}')",
            f"INSERT INTO processed VALUES ('telegram:u:1', '{_STAMP}')",
        ],
    )

    store = await SqlStore.open(sqlite_url(path))
    try:
        session = await store.current_session("telegram:42")
        [message] = await store.list_messages("oldsession01")
        assert session.id == "oldsession01" and session.message_count == 1
        assert session.created_at == _T0
        assert message.text == "hello from v1" and message.seq == 1
        assert await store.is_processed("telegram:u:1") is True
        # The ledger, which that version did not have, works against the old session.
        await store.record_cost(_cost("oldsession01", 0.5))
        summary = await store.cost_summary("oldsession01")
        assert (summary.calls, summary.cost_usd) == (1, 0.5)
    finally:
        await store.close()


async def test_a_file_of_the_second_version_converts_with_its_costs(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    _old_file(
        path,
        2,
        _V2_SCHEMA,
        [
            f"INSERT INTO sessions VALUES ('oldsession02', 'telegram:42', '{_STAMP}', '{_STAMP}')",
            "INSERT INTO costs (session_id, run_id, provider, model, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, at) VALUES"
            " ('oldsession02', 'run-1', 'anthropic', 'claude-sonnet-4-5', 10, 5, 0, 0, 0.25,"
            f" '{_STAMP}')",
        ],
    )
    run = ScheduleRun(id="run-1", schedule_id="sched-1", due_at=_T0, started_at=_T0)

    store = await SqlStore.open(sqlite_url(path))
    try:
        assert (await store.current_session("telegram:42")).id == "oldsession02"
        summary = await store.cost_summary("oldsession02")
        assert (summary.calls, summary.cost_usd) == (1, 0.25)
        await store.record_cost(_cost("oldsession02", 0.5))
        assert (await store.cost_summary("oldsession02")).calls == 2
        # Schedules, which that version did not have, work in the converted file.
        await store.save_schedule(_schedule())
        await store.save_run(run)
        assert await store.due_schedules(_T0) == [_schedule()]
        assert await store.list_runs("sched-1") == [run]
    finally:
        await store.close()


async def test_a_file_of_the_third_version_converts_with_its_schedules(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    schedule = _schedule()
    body = schedule.model_dump_json()
    _old_file(
        path,
        3,
        _V3_SCHEMA,
        [
            "INSERT INTO schedules"
            " (id, owner, platform, chat, thread, status, next_run_at, created_at, body)"
            f" VALUES ('sched-1', 'telegram:7', 'telegram', '42', NULL, 'active', '{_STAMP}',"
            f" '{_STAMP}', '{body}')",
        ],
    )
    fact = MemoryFact(id="f1", scope="default:telegram:7", text="Likes jazz", created_at=_T0)

    store = await SqlStore.open(sqlite_url(path))
    try:
        assert await store.due_schedules(_T0) == [schedule]
        # Facts, which that version did not have, work in the converted file.
        await store.remember_fact(fact)
        assert await store.search_facts(fact.scope, "jazz") == [fact]
    finally:
        await store.close()
