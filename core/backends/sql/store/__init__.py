"""`SqlStore`: every record concern on SQLAlchemy Core, on SQLite or PostgreSQL.

One class per concern, each in its own module, all sharing one async engine (`_base.py`): the
conversation log (`_log.py`), the cost ledger (`_ledger.py`), schedules (`_schedules.py`),
facts (`_facts.py`), checkpoints (`_checkpoints.py`), processed and seen marks (`_marks.py`)
and access records (`_access.py`); reply records are `SqlReplyRecords` (`_replies.py`). The
tables are in `_tables.py`, what differs between the databases in `_dialect.py`, the engine's
settings in `_engine.py`, and the schema's upgrade (Alembic, `core/store/migrations/`) in
`_schema.py`.
"""

from __future__ import annotations

from core.backends.sql.store._engine import parse_url, sqlite_file, sqlite_url
from core.backends.sql.store._replies import SqlReplyRecords
from core.backends.sql.store._schema import (
    Revision,
    current_revision,
    database_revision,
    head_revision,
    upgrade_database,
)
from core.backends.sql.store._store import SqlStore

__all__ = [
    "Revision",
    "SqlReplyRecords",
    "SqlStore",
    "current_revision",
    "database_revision",
    "head_revision",
    "parse_url",
    "sqlite_file",
    "sqlite_url",
    "upgrade_database",
]
