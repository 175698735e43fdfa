"""Tool results the model was shown cut are kept whole, per session and call.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27

The model reads on with the `read_tool_output` tool; the rows go with their session.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_outputs",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("call_id", sa.Text, primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tool_outputs")
