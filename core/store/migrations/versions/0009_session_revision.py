"""A session's revision: raised when its stored messages are rewritten in place.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

Erasing a person (`switchboard people forget`) replaces their messages in group conversations
with tombstones; a process that holds such a history (`core/history.py`) sees the revision
change and reads it again. 0 for every session before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("revision", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("revision")
