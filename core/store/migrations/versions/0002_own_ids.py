"""Messages and cost entries carry their own ids, so a write tried again is made once.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-27

A write whose commit reached the database but whose answer was lost (the connection dropped)
raises, and its caller tries again: the row is then found by its id instead of written twice.
Rows written before this revision have no id (NULL, which no unique index compares equal).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("message_id", sa.Text, nullable=True))
    op.create_index("messages_by_id", "messages", ["session_id", "message_id"], unique=True)
    op.add_column("costs", sa.Column("entry_id", sa.Text, nullable=True))
    op.create_index("costs_by_id", "costs", ["entry_id"], unique=True)


def downgrade() -> None:
    op.drop_index("costs_by_id", "costs")
    op.drop_index("messages_by_id", "messages")
    with op.batch_alter_table("costs") as costs:
        costs.drop_column("entry_id")
    with op.batch_alter_table("messages") as messages:
        messages.drop_column("message_id")
