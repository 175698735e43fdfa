"""Converting a data file of the old embedded `SqliteStore` (schema versions 1 to 12 by
`PRAGMA user_version`; removed after commit 01e8527, where `core/store/sqlite.py` shows it) to
the SQL store's schema, in the transaction that upgrades it.

Such a file has the tables of the records under the names the new schema uses, but in other
shapes (`sessions` without a `number`, `costs` numbered by `id`, facts without their search
terms), and no `alembic_version`. Before the upgrade its tables are renamed `legacy_<name>`
(their triggers and full-text index dropped, their indexes too: index names are global in a
SQLite file); after it, their rows are copied into the new tables, in their creation order,
and the old tables dropped. The upgrade and the conversion commit together or not at all.
The queues and mailboxes of the same file (`bus_*`, `mailbox_items`, `processes`) are not
the store's and are left alone.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection, text

from core.backends.sql.store._dialect import indexed_terms

__all__ = ["copy_legacy", "is_legacy", "set_aside_legacy"]

# The old store's tables, parents after their children (the order they are dropped in; the
# copy goes the other way). `reply_records` was `SqliteReplyRecords`' table in the same file.
_TABLES: Final = (
    "messages",
    "summaries",
    "reopened",
    "costs",
    "schedule_runs",
    "schedules",
    "memory_facts",
    "checkpoints",
    "fences",
    "processed",
    "seen",
    "pairing_requests",
    "approvals",
    "reply_records",
    "sessions",
)
_PREFIX: Final = "legacy_"


def _old_tables(connection: Connection) -> tuple[list[str], set[str]]:
    """The old store's tables of a SQLite file without an Alembic revision (none: not such a
    file), and every table's name."""
    if connection.dialect.name != "sqlite":
        return [], set()
    names = {
        name
        for (name,) in connection.execute(
            text("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
    }
    if "alembic_version" in names:
        return [], names
    return [table for table in _TABLES if table in names], names


def is_legacy(connection: Connection) -> bool:
    """Whether the database is a file of the old embedded store, not converted yet."""
    return bool(_old_tables(connection)[0])


def set_aside_legacy(connection: Connection) -> list[str]:
    """Rename the old store's tables of a SQLite file that has no Alembic revision yet; the
    names of those renamed (none: not an old store's file)."""
    found, names = _old_tables(connection)
    if not found:
        return []
    # The old triggers and index would write to tables that are about to move.
    for (trigger,) in connection.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    ).all():
        if trigger.startswith(("memory_facts_", "messages_touch")):
            connection.exec_driver_sql(f'DROP TRIGGER "{trigger}"')
    if "memory_fts" in names:
        connection.exec_driver_sql("DROP TABLE memory_fts")
    for table in found:
        for (index,) in connection.execute(
            text(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
                " AND sql IS NOT NULL"
            ),
            {"table": table},
        ).all():
            connection.exec_driver_sql(f'DROP INDEX "{index}"')
        connection.exec_driver_sql(f'ALTER TABLE "{table}" RENAME TO "{_PREFIX}{table}"')
    return found


def copy_legacy(connection: Connection, tables: list[str]) -> None:
    """Copy the rows of the renamed tables into the new ones, then drop the old tables."""
    for table in reversed(_TABLES):
        if table not in tables:
            continue
        old = f"{_PREFIX}{table}"
        if table == "memory_facts":
            _copy_facts(connection)
            continue
        columns = _columns(connection, old) & _columns(connection, table)
        pairs = {name: name for name in columns}
        if table == "costs":
            # The old ledger numbered its rows by `id`; creation order is `number` now.
            pairs["number"] = "id"
        names = sorted(pairs)
        into = ", ".join(f'"{name}"' for name in names)
        source = ", ".join(f'"{pairs[name]}"' for name in names)
        # rowid order is the order the old store made them in (`number` is creation order).
        connection.exec_driver_sql(
            f'INSERT INTO "{table}" ({into}) SELECT {source} FROM "{old}" ORDER BY rowid'
        )
    for table in _TABLES:
        if table in tables:
            connection.exec_driver_sql(f'DROP TABLE "{_PREFIX}{table}"')


def _copy_facts(connection: Connection) -> None:
    # The search terms are the store's own folding of the text, made in Python.
    rows = connection.execute(
        text(
            "SELECT number, scope, id, text, created_at, source_session"
            " FROM legacy_memory_facts ORDER BY number"
        )
    ).all()
    for number, scope, fact_id, fact_text, created_at, source in rows:
        connection.execute(
            text(
                "INSERT INTO memory_facts"
                " (number, scope, id, text, terms, created_at, source_session)"
                " VALUES (:number, :scope, :id, :text, :terms, :created_at, :source)"
            ),
            {
                "number": number,
                "scope": scope,
                "id": fact_id,
                "text": fact_text,
                "terms": indexed_terms(fact_text),
                "created_at": created_at,
                "source": source,
            },
        )


def _columns(connection: Connection, table: str) -> set[str]:
    return {row[1] for row in connection.exec_driver_sql(f'PRAGMA table_info("{table}")')}
