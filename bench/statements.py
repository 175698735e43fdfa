"""What one SQL statement and one transaction of the store cost on SQLite, beside `sqlite3`.

The SQL store (`core/backends/sql/store/`) says every record in SQLAlchemy Core and runs it on
an `AsyncEngine`; on SQLite its connections call `sqlite3` in line on the loop's thread
(decision 0028). This measures, on a real file in WAL mode, the CPU of:

- one indexed SELECT of a row, as `sqlite3` runs it (the floor), through SQLAlchemy's
  `exec_driver_sql` (the SQL text given as is), as a Core statement built once and executed
  with its values as parameters (what the store's turn does since decision 0035), and as a
  Core statement built anew on each call (what it did before);
- one read transaction around that SELECT (BEGIN, the statement, COMMIT), with `sqlite3` and
  through the store's engine as its reads run (a pooled connection checked out and given
  back, the `begin` event's BEGIN, the commit).

It prints the microseconds of each, medians of `rounds` rounds of `calls` calls, and writes
them to bench/results/. Figures are CPU time of this process, so a loaded machine moves
them less than wall time; they are properties of the libraries, not targets.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, insert, select

from bench.report import console, table

_CALLS = 2000


async def _measure(call: Callable[[], Awaitable[Any]], calls: int, rounds: int) -> float:
    """The median CPU microseconds of one `call()`, over `rounds` rounds of `calls` calls."""
    results = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            await call()
        results.append((time.process_time() - started) * 1e6 / calls)
    return statistics.median(results)


async def _statements(folder: Path, calls: int, rounds: int) -> dict[str, float]:
    from core.backends.sql.store._engine import READS, open_engine, sqlite_url
    from core.backends.sql.store._tables import messages, metadata

    path = folder / "records.db"
    engine = await open_engine(sqlite_url(path))
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
        await connection.execute(
            insert(messages),
            [
                {
                    "session_id": "s",
                    "seq": seq,
                    "role": "user",
                    "body": "{}",
                    "created_at": "2026-11-27T00:00:00Z",
                    "message_id": f"m{seq}",
                }
                for seq in range(1, 201)
            ],
        )
    m = messages.c
    prebuilt = select(m.seq, m.created_at).where(
        m.session_id == bindparam("id"), m.message_id == bindparam("message_id")
    )
    sql = "SELECT seq, created_at FROM messages WHERE session_id = ? AND message_id = ?"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")

    async def floor() -> None:
        raw.execute(sql, ("s", "m100")).fetchall()

    async def floor_transaction() -> None:
        raw.execute("BEGIN")
        raw.execute(sql, ("s", "m100")).fetchall()
        raw.execute("COMMIT")

    figures: dict[str, float] = {}
    try:
        figures["sqlite3: statement"] = await _measure(floor, calls, rounds)
        async with engine.connect() as connection:

            async def driver_sql() -> None:
                (await connection.exec_driver_sql(sql, ("s", "m100"))).all()

            async def built_once() -> None:
                (await connection.execute(prebuilt, {"id": "s", "message_id": "m100"})).all()

            async def built_each_time() -> None:
                statement = select(m.seq, m.created_at).where(
                    m.session_id == "s", m.message_id == "m100"
                )
                (await connection.execute(statement)).all()

            figures["SQLAlchemy: exec_driver_sql"] = await _measure(driver_sql, calls, rounds)
            figures["SQLAlchemy: Core, built once"] = await _measure(built_once, calls, rounds)
            figures["SQLAlchemy: Core, built each call"] = await _measure(
                built_each_time, calls, rounds
            )
            await connection.rollback()

        async def engine_transaction() -> None:
            # As the store's `_read` does it: a read transaction (a plain BEGIN).
            async with engine.connect() as connection:
                await connection.execution_options(**{READS: True})
                async with connection.begin():
                    (await connection.execute(prebuilt, {"id": "s", "message_id": "m100"})).all()

        figures["sqlite3: read transaction"] = await _measure(floor_transaction, calls, rounds)
        figures["store engine: read transaction"] = await _measure(
            engine_transaction, calls, rounds
        )
    finally:
        raw.close()
        await engine.dispose()
    return figures


def statements(calls: int = _CALLS, rounds: int = 5) -> dict[str, Any]:
    """Measure and print the cost of a statement and a transaction; the figures."""
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as folder:
        figures = asyncio.run(_statements(Path(folder), calls, rounds))
    floor = figures["sqlite3: statement"]
    rows = [[name, f"{micros:.1f}", f"{micros / floor:.1f}x"] for name, micros in figures.items()]
    table(
        f"One indexed SELECT on SQLite, CPU us (median of {rounds} x {calls})",
        ["", "us", "/ sqlite3 statement"],
        rows,
    )
    console.print(
        "  the store's transaction: a pooled connection checked out, BEGIN (the engine's"
        " `begin` event), the statement, COMMIT, the connection given back"
    )
    return {"calls": calls, "rounds": rounds, "cpu_us": figures}
