"""The playbook: tool sequences that ended a turn well, per bot and keyword digest.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

One row per (bot, tool sequence, keyword digest): how many successful turns it was seen in and
when last. Keywords are digests, never words (docs/decisions/0026-playbook-and-attention.md).
Looked up by bot and keyword, hence the index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "playbook",
        sa.Column("bot", sa.Text, primary_key=True),
        sa.Column("tools", sa.Text, primary_key=True),
        sa.Column("keyword", sa.Text, primary_key=True),
        sa.Column("successes", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_index("playbook_by_keyword", "playbook", ["bot", "keyword"])


def downgrade() -> None:
    op.drop_index("playbook_by_keyword", "playbook")
    op.drop_table("playbook")
