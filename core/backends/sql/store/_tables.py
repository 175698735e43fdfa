"""The tables of `SqlStore`, as SQLAlchemy Core `Table`s (the queries are built from these).

The schema itself is made by the Alembic revisions in `core/store/migrations/`; these
definitions describe what the newest revision leaves, for building statements. Times are
fixed-width UTC text (`core/store/_shared.py`), so text order is time order on every database.
Records kept whole are their model's JSON (`body`); the other columns repeat parts of it for
queries. `number` columns are creation order, handed out by the database (`RETURNING`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    false,
)

__all__ = [
    "approvals",
    "checkpoints",
    "costs",
    "fences",
    "images",
    "memory_facts",
    "messages",
    "metadata",
    "pairing_requests",
    "playbook",
    "processed",
    "reopened",
    "reply_records",
    "schedule_runs",
    "schedules",
    "seen",
    "sessions",
    "summaries",
    "takeovers",
    "tool_outputs",
]

metadata = MetaData()

# SQLite makes an INTEGER PRIMARY KEY its rowid (autoincremented); PostgreSQL a BIGINT identity.
_Number = BigInteger().with_variant(Integer(), "sqlite")

sessions = Table(
    "sessions",
    metadata,
    Column("number", _Number, primary_key=True, autoincrement=True),
    Column("id", Text, nullable=False, unique=True),
    Column("key", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    # The model `/model` chose for this session; NULL: the profile's default.
    Column("model", Text, nullable=True),
    # `<platform>:<user id>` of the person a direct conversation is with; NULL: a group, a
    # schedule's session, or a session made before this column.
    Column("direct_with", Text, nullable=True),
    # Raised when the session's stored messages are rewritten in place (a person erased):
    # a process holding its history reads it again (`core/history.py`).
    Column("revision", Integer, nullable=False, server_default="0"),
    # What `/fork NAME` called the session (unique within its key); NULL: unnamed.
    Column("name", Text, nullable=True),
    # The session whose history this one's began as a copy of (`/fork`); NULL: not a fork.
    Column("forked_from", Text, nullable=True),
)

messages = Table(
    "messages",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("role", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    # `Message.id`, unique within the session when given.
    Column("message_id", Text, nullable=True),
    # `Message.author`: who wrote a person's message, `<platform>:<user id>`.
    Column("author", Text, nullable=True),
)

summaries = Table(
    "summaries",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("up_to_seq", Integer, primary_key=True),
    Column("text", Text, nullable=False),
    Column("created_at", Text, nullable=False),
)

# A key whose current session is an earlier one, reopened; `create_session` clears it.
reopened = Table(
    "reopened",
    metadata,
    Column("key", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
)

# The highest fencing epoch a write was seen with, per session key (`core/fencing.py`).
fences = Table(
    "fences",
    metadata,
    Column("session_key", Text, primary_key=True),
    Column("epoch", BigInteger, nullable=False),
)

# One row per provider call; no foreign key to `sessions`: spending outlives a deleted session.
costs = Table(
    "costs",
    metadata,
    Column("number", _Number, primary_key=True, autoincrement=True),
    Column("session_id", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("provider", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("cost_usd", Float, nullable=True),
    Column("at", Text, nullable=False),
    Column("user_key", Text, nullable=True),
    Column("chat_key", Text, nullable=True),
    # `CostEntry.id`, unique when given.
    Column("entry_id", Text, nullable=True),
    # `CostEntry.degraded`: the call ran on `[budgets] degrade_model`.
    Column("degraded", Boolean, nullable=False, server_default=false()),
)

schedules = Table(
    "schedules",
    metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("platform", Text, nullable=False),
    Column("chat", Text, nullable=False),
    Column("thread", Text, nullable=True),
    Column("status", Text, nullable=False),
    Column("next_run_at", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("body", Text, nullable=False),
)

schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("schedule_id", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("body", Text, nullable=False),
)

# `terms` is the fact's search terms (`core.facts.search_terms`), what PostgreSQL indexes;
# SQLite's FTS5 table indexes `text` itself. Both are made by the migration.
memory_facts = Table(
    "memory_facts",
    metadata,
    Column("number", _Number, primary_key=True, autoincrement=True),
    Column("scope", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("terms", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("source_session", Text, nullable=True),
    # Float32 bytes (`core.embeddings.pack_vector`) and the model that made them; NULL: the
    # fact is found by keyword only (no endpoint configured, or it failed).
    Column("embedding", LargeBinary, nullable=True),
    Column("embedding_model", Text, nullable=True),
    # Who made the fact: "tool" (`remember`) or "consolidated" (core/consolidation.py).
    Column("source", Text, nullable=False, server_default="tool"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_key", Text, primary_key=True),
    Column("status", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("body", Text, nullable=False),
)

processed = Table(
    "processed",
    metadata,
    Column("key", Text, primary_key=True),
    Column("at", Text, nullable=False),
)

seen = Table(
    "seen",
    metadata,
    Column("platform", Text, primary_key=True),
    Column("bot", Text, primary_key=True),
    Column("chat", Text, primary_key=True),
    Column("message_id", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("at", Text, nullable=False),
)

pairing_requests = Table(
    "pairing_requests",
    metadata,
    Column("platform", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("code", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text, nullable=False),
    Column("body", Text, nullable=False),
)

approvals = Table(
    "approvals",
    metadata,
    Column("platform", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("approved_at", Text, nullable=False),
    Column("body", Text, nullable=False),
)

reply_records = Table(
    "reply_records",
    metadata,
    Column("key", Text, primary_key=True),
    Column("body", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# The whole output of a tool call the model was shown cut (`core/store/tool_outputs.py`).
tool_outputs = Table(
    "tool_outputs",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("call_id", Text, primary_key=True),
    Column("text", Text, nullable=False),
    Column("created_at", Text, nullable=False),
)

# The images of a session's messages, once each by the digest of their bytes; a message's
# body holds only the reference (`core/store/images.py`).
images = Table(
    "images",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("digest", Text, primary_key=True),
    Column("media_type", Text, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", Text, nullable=False),
)

# Chats an operator has taken over (`core/store/takeovers.py`).
takeovers = Table(
    "takeovers",
    metadata,
    Column("chat", Text, primary_key=True),
    Column("by", Text, nullable=False),
    Column("since", Text, nullable=False),
    Column("until", Text, nullable=False),
    Column("ended_at", Text, nullable=True),
)

# Tool sequences that ended a turn well, per bot and keyword digest (`core/store/playbook.py`).
# `tools`: the names in call order, joined by spaces (a tool's name has none).
playbook = Table(
    "playbook",
    metadata,
    Column("bot", Text, primary_key=True),
    Column("tools", Text, primary_key=True),
    Column("keyword", Text, primary_key=True),
    Column("successes", Integer, nullable=False),
    Column("updated_at", Text, nullable=False),
)
