"""The PostgreSQL of the distributed workloads, and what it counts.

The bench starts its own server the way the suite does (`tests/postgres_server.py`: initdb and
postgres on a free port in a temporary folder, durability off), with `pg_stat_statements`
loaded when the installed PostgreSQL has it. Each phase gets a database of its own; its
figures come from the server, filtered to that database:

- statements: `pg_stat_statements` calls, every statement the server ran for it but the
  transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE);
- transactions: the COMMIT and ROLLBACK statements among them. SQLAlchemy opens a transaction
  for every statement it runs, so this is every transaction the workers made (its pool's
  pre-ping at each checkout is one, `BEGIN; ; ROLLBACK`: the rolled-back ones); and it is
  counted the moment it happens, where `pg_stat_database` (xact_commit + xact_rollback) hears
  of a busy connection's transactions up to 10 s late. `pg_stat_database` is read once the
  phase's workers have exited (their connections' counts are then all in) as a check of the
  whole phase, start-up included.

The CPU of the server is that of the postmaster and every process it started (a connection's
backend included, and those that have exited).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from glob import glob
from typing import Any

from bench.common import BenchError, cpu_seconds

# Statement kinds that are a transaction's frame, not its work.
_CONTROL = ("BEGIN", "START", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "ABORT")


def has_pg_stat_statements() -> bool:
    return bool(glob("/usr/lib/postgresql/*/lib/pg_stat_statements.so"))


@contextmanager
def postgres() -> Iterator[Any]:
    """A PostgreSQL server of the bench's own (a `tests.postgres_server.PostgresServer`),
    stopped and its folder removed at the end."""
    from tests.postgres_server import PostgresServer

    if not has_pg_stat_statements():
        raise BenchError("pg_stat_statements is not installed with PostgreSQL")
    try:
        server = PostgresServer(
            settings={
                "shared_preload_libraries": "pg_stat_statements",
                "pg_stat_statements.max": "10000",
            }
        )
        server.start()
    except RuntimeError as exc:
        raise BenchError(f"PostgreSQL: {exc}") from None
    try:
        asyncio.run(_admin(server, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        yield server
    finally:
        server.stop()


def plain_url(url: str) -> str:
    """`postgresql+asyncpg://...` as an operator writes DATABASE_URL: `postgresql://...`."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _admin(server: Any, sql: str, *args: Any) -> list[Any]:
    import asyncpg

    connection = await asyncpg.connect(plain_url(server.url()))
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


def kind(query: str) -> str:
    """A statement's kind: its first word (`ROLLBACK TO` a savepoint is `SAVEPOINT`)."""
    words = query.strip().upper().replace(";", " ").split()
    if not words:
        return "?"
    if words[0] == "ROLLBACK" and len(words) > 1 and words[1] == "TO":
        return "SAVEPOINT"
    return words[0]


async def statement_counts(server: Any, database: str) -> dict[str, int]:
    """Statements the server has run for `database` so far, by kind."""
    rows = await _admin(
        server,
        "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        " WHERE d.datname = $1",
        database,
    )
    counts: Counter[str] = Counter()
    for row in rows:
        counts[kind(row["query"])] += int(row["calls"])
    return dict(counts)


def figures(before: dict[str, int], after: dict[str, int], turns: int) -> dict[str, Any]:
    """Statements and transactions per turn between two `statement_counts`."""
    diff = Counter(after)
    diff.subtract(before)
    work = {name: n for name, n in diff.items() if name not in _CONTROL and n > 0}
    transactions = diff["COMMIT"] + diff["END"] + diff["ROLLBACK"] + diff["ABORT"]
    return {
        "statements_per_turn": sum(work.values()) / turns,
        "transactions_per_turn": transactions / turns,
        "rollbacks_per_turn": (diff["ROLLBACK"] + diff["ABORT"]) / turns,
        "statements_by_kind": {
            name: round(n / turns, 2) for name, n in sorted(work.items(), key=lambda kv: -kv[1])
        },
    }


async def whole_database(server: Any, database: str) -> dict[str, int]:
    """Once no connection to `database` is left: `pg_stat_database`'s transactions and the
    COMMIT and ROLLBACK statements counted for it."""
    for _ in range(200):
        rows = await _admin(
            server, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1", database
        )
        if rows[0]["n"] == 0:
            break
        await asyncio.sleep(0.05)  # the workers' connections are closing
    [row] = await _admin(
        server,
        "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1",
        database,
    )
    counts = await statement_counts(server, database)
    return {
        "pg_stat_database_transactions": int(row["n"]),
        "commit_rollback_statements": counts.get("COMMIT", 0) + counts.get("ROLLBACK", 0),
    }


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a process and every process it started, in seconds: its own, its reaped
    children's (cutime, cstime) and its live children's."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks
    for child in _children(pid):
        try:
            total += cpu_seconds(child)
        except OSError:
            pass  # it exited just now: its CPU is in the parent's cutime at its reaping
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found
