"""A session's name and the session it was forked from (`/fork`, `/sessions`, `/switch`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

`sessions.name`: what `/fork NAME` called the session, so `/switch NAME` finds it again; NULL
for a session nobody named. `sessions.forked_from`: the id of the session whose history a
fork started as a copy of; NULL for every session before this revision and every session
not forked. Erasing a person follows it, so a fork's copies of their words go with theirs
(docs/decisions/0023-forking-and-switching-sessions.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("name", sa.Text, nullable=True))
    op.add_column("sessions", sa.Column("forked_from", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as sessions:
        sessions.drop_column("forked_from")
        sessions.drop_column("name")
