"""A ledger entry says whether its call ran on the cheaper model of `[budgets] degrade_model`.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Every entry before this revision ran on the model it was meant to: false.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "costs",
        sa.Column("degraded", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("costs") as costs:
        costs.drop_column("degraded")
