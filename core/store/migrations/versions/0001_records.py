"""Every record concern of the SQL store: the first schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-27

Full-text search differs per database: on SQLite an FTS5 table over the facts' text, kept in
step by triggers; on PostgreSQL a generated `tsvector` column over the facts' search terms
with a GIN index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_Number = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _number() -> sa.Column[int]:
    return sa.Column("number", _Number, primary_key=True, autoincrement=True)


def _session_ref() -> sa.Column[str]:
    return sa.Column(
        "session_id",
        sa.Text,
        sa.ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
    )


def upgrade() -> None:
    _log()
    _ledger()
    _schedules()
    _facts()
    _marks()
    _access()


def _log() -> None:
    op.create_table(
        "sessions",
        _number(),
        sa.Column("id", sa.Text, nullable=False, unique=True),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_index("sessions_by_key", "sessions", ["key", "created_at"])
    op.create_index("sessions_by_updated", "sessions", ["updated_at"])
    op.create_table(
        "messages",
        _session_ref(),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_table(
        "summaries",
        _session_ref(),
        sa.Column("up_to_seq", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "up_to_seq"),
    )
    op.create_table(
        "reopened",
        sa.Column("key", sa.Text, primary_key=True),
        _session_ref(),
    )
    op.create_table(
        "fences",
        sa.Column("session_key", sa.Text, primary_key=True),
        sa.Column("epoch", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "checkpoints",
        sa.Column("run_key", sa.Text, primary_key=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("started_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_index("checkpoints_by_status", "checkpoints", ["status", "updated_at"])


def _ledger() -> None:
    # No foreign key to `sessions`: what was spent outlives a deleted conversation.
    op.create_table(
        "costs",
        _number(),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=True),
        sa.Column("at", sa.Text, nullable=False),
        sa.Column("user_key", sa.Text, nullable=True),
        sa.Column("chat_key", sa.Text, nullable=True),
    )
    op.create_index("costs_by_session", "costs", ["session_id"])
    op.create_index("costs_by_user", "costs", ["user_key", "at"])
    op.create_index("costs_by_chat", "costs", ["chat_key", "at"])
    op.create_index("costs_by_at", "costs", ["at"])


def _schedules() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("chat", sa.Text, nullable=False),
        sa.Column("thread", sa.Text, nullable=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("next_run_at", sa.Text, nullable=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_index("schedules_by_due", "schedules", ["status", "next_run_at"])
    op.create_index("schedules_by_owner", "schedules", ["owner"])
    op.create_table(
        "schedule_runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column(
            "schedule_id",
            sa.Text,
            sa.ForeignKey("schedules.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("started_at", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_index("schedule_runs_by_start", "schedule_runs", ["schedule_id", "started_at"])


def _facts() -> None:
    op.create_table(
        "memory_facts",
        _number(),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("terms", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("source_session", sa.Text, nullable=True),
        sa.UniqueConstraint("scope", "id"),
    )
    op.create_index("memory_facts_by_age", "memory_facts", ["scope", "created_at", "id"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE memory_facts ADD COLUMN search tsvector"
            " GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED"
        )
        op.execute("CREATE INDEX memory_facts_search ON memory_facts USING GIN (search)")
        return
    # External content: the index keeps only its terms and reads the text from memory_facts.
    op.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5 (text, content = 'memory_facts',"
        " content_rowid = 'number', tokenize = 'unicode61 remove_diacritics 2', prefix = '3')"
    )
    op.execute(
        "CREATE TRIGGER memory_facts_indexed AFTER INSERT ON memory_facts BEGIN"
        " INSERT INTO memory_fts (rowid, text) VALUES (new.number, new.text); END"
    )
    op.execute(
        "CREATE TRIGGER memory_facts_unindexed AFTER DELETE ON memory_facts BEGIN"
        " INSERT INTO memory_fts (memory_fts, rowid, text)"
        " VALUES ('delete', old.number, old.text); END"
    )
    op.execute(
        "CREATE TRIGGER memory_facts_reindexed AFTER UPDATE OF text ON memory_facts BEGIN"
        " INSERT INTO memory_fts (memory_fts, rowid, text)"
        " VALUES ('delete', old.number, old.text);"
        " INSERT INTO memory_fts (rowid, text) VALUES (new.number, new.text); END"
    )


def _marks() -> None:
    op.create_table(
        "processed",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("at", sa.Text, nullable=False),
    )
    op.create_table(
        "seen",
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("bot", sa.Text, nullable=False),
        sa.Column("chat", sa.Text, nullable=False),
        sa.Column("message_id", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("platform", "bot", "chat"),
    )
    op.create_table(
        "reply_records",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("reply_records_by_age", "reply_records", ["updated_at"])


def _access() -> None:
    op.create_table(
        "pairing_requests",
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id"),
    )
    op.create_index(
        "pairing_requests_by_code", "pairing_requests", ["platform", "code"], unique=True
    )
    op.create_table(
        "approvals",
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("approved_at", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id"),
    )


def downgrade() -> None:
    for table in (
        "approvals",
        "pairing_requests",
        "reply_records",
        "seen",
        "processed",
        "memory_facts",
        "schedule_runs",
        "schedules",
        "costs",
        "checkpoints",
        "fences",
        "reopened",
        "summaries",
        "messages",
        "sessions",
    ):
        if table == "memory_facts" and op.get_bind().dialect.name == "sqlite":
            op.execute("DROP TABLE memory_fts")
        op.drop_table(table)
