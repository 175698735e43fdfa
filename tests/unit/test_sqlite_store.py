"""What only `SqliteStore` promises: a file that outlives the process, and a versioned schema.

The behaviour every store shares is in `tests/contract/test_store_contract.py`.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import pytest

from core.envelopes import Address
from core.errors import StoreError
from core.facts import MemoryFact
from core.fencing import Fence
from core.messages import ImagePart, Message, Usage
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store import CostEntry
from core.store.sqlite import SCHEMA_VERSION, SqliteStore

FROZEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def frozen_clock() -> datetime:
    return FROZEN


# The schema as version 1 shipped it, frozen here so the upgrade test keeps testing an upgrade
# from what real files contain even if someone edits the first migration by mistake.
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

# What version 2 added (the cost ledger), frozen for the same reason.
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

# What version 3 added (schedules and their runs), frozen for the same reason.
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


def _entry(session_id: str, cost_usd: float | None, *, at: datetime = FROZEN) -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="run-1",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=cost_usd,
        at=at,
    )


async def _pragma(path: Path, name: str) -> object:
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall(f"PRAGMA {name}"))
    return rows[0][0]


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    store = await SqliteStore.open(path)
    session = await store.current_session("telegram:42")
    image = ImagePart(media_type="image/png", data=b"\x89PNG\xff\x00")
    first = await store.append_message(session.id, Message.user("hi", images=[image]))
    second = await store.append_message(session.id, Message.assistant("hello"))
    await store.mark_processed("telegram:update:1")
    await store.close()

    reopened = await SqliteStore.open(path)
    try:
        assert (await reopened.current_session("telegram:42")).id == session.id
        assert await reopened.list_messages(session.id) == [first, second]
        assert await reopened.is_processed("telegram:update:1") is True
        assert (await reopened.append_message(session.id, Message.user("again"))).seq == 3
    finally:
        await reopened.close()


async def test_the_highest_fence_seen_survives_close_and_reopen(tmp_path: Path) -> None:
    """A restarted process's store still refuses a claim that was overtaken before it."""
    path = tmp_path / "switchboard.db"
    store = await SqliteStore.open(path)
    session = await store.current_session("telegram:42")
    await store.append_message(session.id, Message.user("new"), fence=_fence(9))
    await store.close()

    reopened = await SqliteStore.open(path)
    try:
        with pytest.raises(StoreError, match="overtaken"):
            await reopened.append_message(session.id, Message.user("old"), fence=_fence(8))
        assert [m.text for m in await reopened.list_messages(session.id)] == ["new"]
    finally:
        await reopened.close()


def _fence(epoch: int) -> Fence:
    return Fence(session_key="telegram:42", epoch=epoch)


async def test_open_creates_parent_directories_and_sets_up_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "data" / "switchboard.db"

    store = await SqliteStore.open(path)
    await store.close()

    assert await asyncio.to_thread(path.is_file)
    assert await _pragma(path, "user_version") == SCHEMA_VERSION
    assert await _pragma(path, "journal_mode") == "wal"


async def test_reopening_keeps_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    await (await SqliteStore.open(path)).close()
    await (await SqliteStore.open(path)).close()

    assert SCHEMA_VERSION >= 1
    assert await _pragma(path, "user_version") == SCHEMA_VERSION


async def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    async with aiosqlite.connect(path) as db:
        await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        await db.commit()

    with pytest.raises(StoreError, match="schema version"):
        await SqliteStore.open(path)


async def test_memory_database_works() -> None:
    store = await SqliteStore.open(":memory:")
    try:
        session = await store.current_session("terminal")
        stored = await store.append_message(session.id, Message.user("hi"))
        assert await store.list_messages(session.id) == [stored]
    finally:
        await store.close()


async def test_unopenable_path_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteStore.open(tmp_path)


async def test_use_after_close_raises_store_error() -> None:
    store = await SqliteStore.open(":memory:")
    await store.close()
    await store.close()  # closing twice is harmless

    with pytest.raises(StoreError, match="closed"):
        await store.current_session("terminal")


async def test_new_session_is_current_even_within_the_same_instant() -> None:
    """With equal `created_at` the later-created session still wins (rowid breaks the tie)."""
    store = await SqliteStore.open(":memory:", clock=frozen_clock)
    try:
        old = await store.current_session("terminal")
        fresh = await store.create_session("terminal")

        assert fresh.created_at == old.created_at == FROZEN
        assert (await store.current_session("terminal")).id == fresh.id
    finally:
        await store.close()


async def test_naive_clock_is_refused() -> None:
    store = await SqliteStore.open(":memory:", clock=lambda: datetime(2025, 3, 1))  # noqa: DTZ001
    try:
        with pytest.raises(StoreError, match="naive"):
            await store.create_session("terminal")
        assert await store.list_sessions() == []
    finally:
        await store.close()


async def test_timestamps_come_back_in_utc() -> None:
    plus_two = datetime.fromisoformat("2025-03-01T14:00:00+02:00")
    store = await SqliteStore.open(":memory:", clock=lambda: plus_two)
    try:
        session = await store.create_session("terminal")
        found = await store.get_session(session.id)
        stored = await store.append_message(session.id, Message.user("hi"))
        [listed] = await store.list_messages(session.id)
    finally:
        await store.close()

    assert found is not None and found.created_at == FROZEN
    assert found.created_at.tzinfo == UTC
    assert stored.created_at == listed.created_at == FROZEN
    assert listed.created_at is not None and listed.created_at.tzinfo == UTC


async def test_version_1_file_is_upgraded_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    stamp = "2025-03-01T12:00:00.000000+00:00"
    hello = Message.user("hello from v1")
    async with aiosqlite.connect(path) as db:
        for statement in _V1_SCHEMA:
            await db.execute(statement)
        await db.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES (?, ?, ?, ?)",
            ("oldsession01", "telegram:42", stamp, stamp),
        )
        await db.execute(
            "INSERT INTO messages (session_id, seq, role, body, created_at) VALUES (?, ?, ?, ?, ?)",
            (
                "oldsession01",
                1,
                "user",
                hello.model_dump_json(exclude={"seq", "created_at"}),
                stamp,
            ),
        )
        await db.execute("INSERT INTO processed (key, at) VALUES (?, ?)", ("telegram:u:1", stamp))
        await db.execute("PRAGMA user_version = 1")
        await db.commit()

    store = await SqliteStore.open(path)
    try:
        session = await store.current_session("telegram:42")
        [message] = await store.list_messages("oldsession01")
        assert session.id == "oldsession01" and session.message_count == 1
        assert session.created_at == FROZEN
        assert message.text == "hello from v1" and message.seq == 1
        assert await store.is_processed("telegram:u:1") is True
        # The new ledger works against the old session.
        await store.record_cost(_entry("oldsession01", 0.5))
        summary = await store.cost_summary("oldsession01")
        assert (summary.calls, summary.cost_usd) == (1, 0.5)
    finally:
        await store.close()

    assert SCHEMA_VERSION >= 2
    assert await _pragma(path, "user_version") == SCHEMA_VERSION
    async with aiosqlite.connect(path) as db:
        indexes = await db.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'costs'"
        )
    assert ("costs_by_session",) in list(indexes)


async def test_non_finite_cost_is_refused() -> None:
    """SQLite stores NaN as NULL, which would turn a broken price into an "unpriced" call."""
    store = await SqliteStore.open(":memory:", clock=frozen_clock)
    try:
        session = await store.create_session("terminal")
        for bad in (math.nan, math.inf):
            with pytest.raises(ValueError, match="finite"):
                await store.record_cost(_entry(session.id, bad))
        assert (await store.cost_summary()).calls == 0
    finally:
        await store.close()


async def test_naive_cost_time_is_refused() -> None:
    store = await SqliteStore.open(":memory:", clock=frozen_clock)
    try:
        session = await store.create_session("terminal")
        naive = datetime(2025, 3, 1, 12, 0)  # noqa: DTZ001
        with pytest.raises(StoreError, match="naive"):
            await store.record_cost(_entry(session.id, 1.0, at=naive))
        assert (await store.cost_summary()).calls == 0
    finally:
        await store.close()


async def test_cost_times_in_other_zones_order_by_instant() -> None:
    """`at` is stored in UTC, so 13:00+02:00 (11:00 UTC) is earlier than 12:00 UTC."""
    store = await SqliteStore.open(":memory:", clock=frozen_clock)
    try:
        east = await store.create_session("east")
        utc = await store.create_session("utc")
        await store.record_cost(_entry(utc.id, 1.0, at=FROZEN))
        await store.record_cost(
            _entry(east.id, 1.0, at=datetime.fromisoformat("2025-03-01T13:00:00+02:00"))
        )

        listed = await store.costs_by_session()
    finally:
        await store.close()

    assert [s.session_id for s in listed] == [utc.id, east.id]


async def test_version_2_file_is_upgraded_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    stamp = "2025-03-01T12:00:00.000000+00:00"
    async with aiosqlite.connect(path) as db:
        for statement in _V2_SCHEMA:
            await db.execute(statement)
        await db.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES (?, ?, ?, ?)",
            ("oldsession02", "telegram:42", stamp, stamp),
        )
        await db.execute(
            "INSERT INTO costs (session_id, run_id, provider, model, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("oldsession02", "run-1", "anthropic", "claude-sonnet-4-5", 10, 5, 0, 0, 0.25, stamp),
        )
        await db.execute("PRAGMA user_version = 2")
        await db.commit()

    schedule = Schedule(
        id="sched-1",
        cadence=IntervalCadence(seconds=3600, start=FROZEN),
        prompt="Anything new?",
        deliver_to=Address(platform="telegram", chat="42"),
        owner="telegram:7",
        next_run_at=FROZEN,
        created_at=FROZEN,
        updated_at=FROZEN,
    )
    run = ScheduleRun(id="run-1", schedule_id="sched-1", due_at=FROZEN, started_at=FROZEN)
    store = await SqliteStore.open(path)
    try:
        assert (await store.current_session("telegram:42")).id == "oldsession02"
        summary = await store.cost_summary("oldsession02")
        assert (summary.calls, summary.cost_usd) == (1, 0.25)
        # The new tables work in the upgraded file.
        await store.save_schedule(schedule)
        await store.save_run(run)
        assert await store.due_schedules(FROZEN) == [schedule]
        assert await store.list_runs("sched-1") == [run]
    finally:
        await store.close()

    assert SCHEMA_VERSION >= 3
    assert await _pragma(path, "user_version") == SCHEMA_VERSION
    async with aiosqlite.connect(path) as db:
        indexes = await db.execute_fetchall(
            "SELECT tbl_name, name FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name IN ('schedules', 'schedule_runs') AND sql IS NOT NULL"
        )
    assert set(indexes) >= {
        ("schedules", "schedules_by_due"),
        ("schedules", "schedules_by_owner"),
        ("schedule_runs", "schedule_runs_by_start"),
    }


async def test_version_3_file_is_upgraded_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    schedule = _schedule_at(FROZEN)
    async with aiosqlite.connect(path) as db:
        for statement in _V3_SCHEMA:
            await db.execute(statement)
        await db.execute(
            "INSERT INTO schedules"
            " (id, owner, platform, chat, thread, status, next_run_at, created_at, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                schedule.id,
                schedule.owner,
                "telegram",
                "42",
                None,
                "active",
                "2025-03-01T12:00:00.000000+00:00",
                "2025-03-01T12:00:00.000000+00:00",
                schedule.model_dump_json(),
            ),
        )
        await db.execute("PRAGMA user_version = 3")
        await db.commit()

    fact = MemoryFact(id="f1", scope="default:telegram:7", text="Likes jazz", created_at=FROZEN)
    store = await SqliteStore.open(path)
    try:
        assert await store.due_schedules(FROZEN) == [schedule]
        # The new tables work in the upgraded file.
        await store.remember_fact(fact)
        assert await store.search_facts(fact.scope, "jazz") == [fact]
    finally:
        await store.close()

    assert SCHEMA_VERSION >= 4
    assert await _pragma(path, "user_version") == SCHEMA_VERSION
    async with aiosqlite.connect(path) as db:
        made = await db.execute_fetchall(
            "SELECT type, name FROM sqlite_master WHERE tbl_name IN ('memory_facts', 'memory_fts')"
            " AND type IN ('table', 'index', 'trigger') AND sql IS NOT NULL"
        )
    assert set(made) >= {
        ("table", "memory_facts"),
        ("index", "memory_facts_by_age"),
        ("table", "memory_fts"),
        ("trigger", "memory_facts_indexed"),
        ("trigger", "memory_facts_unindexed"),
    }


async def test_the_fact_index_stays_in_step_through_forgetting_and_vacuum(tmp_path: Path) -> None:
    """The index points at `memory_facts.number`, which VACUUM keeps (an implicit rowid may not)."""
    path = tmp_path / "switchboard.db"
    scope = "default:telegram:7"
    store = await SqliteStore.open(path)
    try:
        for number, word in enumerate(("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")):
            await store.remember_fact(
                MemoryFact(id=f"f{number}", scope=scope, text=f"note {word}", created_at=FROZEN)
            )
        for number in (0, 2, 3):
            assert await store.forget_fact(scope, f"f{number}") is True
    finally:
        await store.close()
    async with aiosqlite.connect(path) as db:
        await db.execute("VACUUM")
        await db.execute("INSERT INTO memory_fts (memory_fts) VALUES ('integrity-check')")

    store = await SqliteStore.open(path)
    try:
        assert [f.text for f in await store.search_facts(scope, "echo")] == ["note echo"]
        assert await store.search_facts(scope, "charlie") == []
        found = await store.search_facts(scope, "note", limit=10)
        assert sorted(f.id for f in found) == ["f1", "f4", "f5"]
    finally:
        await store.close()


def _schedule_at(moment: datetime) -> Schedule:
    return Schedule(
        id="sched-1",
        cadence=IntervalCadence(seconds=3600, start=moment),
        prompt="Anything new?",
        deliver_to=Address(platform="telegram", chat="42"),
        owner="telegram:7",
        next_run_at=moment,
        created_at=moment,
        updated_at=moment,
    )
