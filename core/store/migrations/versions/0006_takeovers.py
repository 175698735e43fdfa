"""Takeovers: an operator answers a chat in the bot's place until handback or expiry.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

One row per chat (`<platform>:<chat>[:<thread>]`): its newest takeover, `ended_at` NULL while
it runs. The expiry sweep looks for rows not ended by `until`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "takeovers",
        sa.Column("chat", sa.Text, primary_key=True),
        sa.Column("by", sa.Text, nullable=False),
        sa.Column("since", sa.Text, nullable=False),
        sa.Column("until", sa.Text, nullable=False),
        sa.Column("ended_at", sa.Text, nullable=True),
    )
    op.create_index("takeovers_by_until", "takeovers", ["ended_at", "until"])


def downgrade() -> None:
    op.drop_index("takeovers_by_until", "takeovers")
    op.drop_table("takeovers")
