"""Where a remembered fact came from: the model's `remember` call, or consolidation.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

`memory_facts.source`: "tool" (the model called `remember`) or "consolidated" (the memory
consolidation pass found it in a conversation, `core/consolidation.py`; `source_session`
names that conversation). Every fact before this revision came from the tool, so the column
is filled with "tool" for them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "memory_facts",
        sa.Column("source", sa.Text, nullable=False, server_default="tool"),
    )


def downgrade() -> None:
    # Not a batch (which rebuilds the table on SQLite, losing the full-text triggers): SQLite
    # has dropped columns in place since 3.35.
    op.drop_column("memory_facts", "source")
