"""The images of a session's messages, kept once each by the digest of their bytes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

A message stored from now on holds a reference to each image (`ImagePart.ref`), the bytes in
this table; messages stored before keep theirs inline and are read as they were
(docs/decisions/0033-images-kept-apart.md). The rows go with their session.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "images",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("digest", sa.Text, primary_key=True),
        sa.Column("media_type", sa.Text, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("images")
