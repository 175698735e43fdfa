"""A session keeps the model `/model` chose for it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27

NULL (every session before this revision): the profile's default model.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("model", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("model")
