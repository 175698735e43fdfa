"""A remembered fact keeps its embedding, for hybrid (keyword and similarity) search.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27

`embedding`: float32 little-endian bytes (BLOB on SQLite, bytea on PostgreSQL; no pgvector);
`embedding_model`: the model that made them. NULL (every fact before this revision, and any
remembered without an embeddings endpoint): found by keyword only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memory_facts", sa.Column("embedding", sa.LargeBinary, nullable=True))
    op.add_column("memory_facts", sa.Column("embedding_model", sa.Text, nullable=True))


def downgrade() -> None:
    # Not a batch (which rebuilds the table on SQLite, losing the full-text triggers): SQLite
    # has dropped columns in place since 3.35.
    op.drop_column("memory_facts", "embedding_model")
    op.drop_column("memory_facts", "embedding")
