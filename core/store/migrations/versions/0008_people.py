"""Who wrote a person's message, and whom a direct conversation is with.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

`messages.author` and `sessions.direct_with` (`<platform>:<user id>`) let `switchboard people`
find one person's data. NULL in rows from before this revision: those are found as well as
they can be (`core/backends/sql/store/_people.py`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("author", sa.Text, nullable=True))
    op.add_column("sessions", sa.Column("direct_with", sa.Text, nullable=True))
    op.create_index("messages_by_author", "messages", ["author"])
    op.create_index("sessions_by_person", "sessions", ["direct_with"])


def downgrade() -> None:
    op.drop_index("sessions_by_person", "sessions")
    op.drop_index("messages_by_author", "messages")
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("direct_with")
    with op.batch_alter_table("messages") as messages:
        messages.drop_column("author")
