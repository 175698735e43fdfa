"""The `SessionForks` of `SqlStore`: a session copied into a new one of the same key, in one
transaction of `INSERT ... SELECT`s (the rows never pass through Python)."""

from __future__ import annotations

from sqlalchemy import delete, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store import _log
from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import lock_for_transaction, upsert
from core.backends.sql.store._tables import (
    images,
    messages,
    reopened,
    sessions,
    summaries,
    tool_outputs,
)
from core.errors import StoreError
from core.fencing import Fence
from core.store._shared import check_limit, utc_text
from core.store.log import SessionRecord, new_session_id

__all__ = ["SqlForks"]

# A fork's `sessions` columns, in the order its `SELECT` gives them.
_FORK_COLUMNS = [
    "id",
    "key",
    "created_at",
    "updated_at",
    "model",
    "direct_with",
    "name",
    "forked_from",
]


class SqlForks(SqlBase):
    """The `SessionForks` of `SqlStore`."""

    async def fork_session(
        self, session_id: str, *, name: str | None = None, fence: Fence | None = None
    ) -> SessionRecord:
        """A new current session of the key, its history a copy of `session_id`'s."""
        now = utc_text(self._now())
        async with self._begin(f"fork session {session_id!r}") as db:
            if fence is not None:
                await _log.check_fence(db, self._dialect, fence)
            source = await _log.session_of(db, session_id)
            if source is None:
                raise StoreError(f"cannot fork: no session has id {session_id!r}")
            # Two forks of one key at once cannot both take a name.
            await lock_for_transaction(self._dialect, db, f"session:{source.key}")
            if name is not None and await _named(db, source.key, name):
                raise StoreError(f"cannot fork: this chat has a session named {name!r} already")
            fork_id = new_session_id()
            s = sessions.c
            await db.execute(
                insert(sessions).from_select(
                    _FORK_COLUMNS,
                    select(
                        literal(fork_id),
                        s.key,
                        literal(now),
                        literal(now),
                        s.model,
                        s.direct_with,
                        literal(name),
                        s.id,
                    ).where(s.id == session_id),
                )
            )
            await _copy_rows(db, session_id, fork_id)
            # The fork is the key's newest session: current unless another is reopened.
            await db.execute(delete(reopened).where(reopened.c.key == source.key))
            forked = await _log.session_of(db, fork_id)
        if forked is None:  # pragma: no cover - inserted in the same transaction
            raise StoreError(f"cannot fork session {session_id!r}: the copy vanished")
        return forked

    async def switch_session(
        self, key: str, session_id: str, *, fence: Fence | None = None
    ) -> SessionRecord | None:
        """Make the key's session `session_id` current; None if the key has no such session."""
        now = utc_text(self._now())
        async with self._begin(f"switch {key!r} to session {session_id!r}") as db:
            if fence is not None:
                await _log.check_fence(db, self._dialect, fence)
            touched = await db.execute(
                update(sessions)
                .where(sessions.c.id == session_id, sessions.c.key == key)
                .values(updated_at=now)
                .returning(sessions.c.id)
            )
            if touched.first() is None:
                return None
            values = {"key": key, "session_id": session_id}
            await db.execute(upsert(self._dialect, reopened, tuple(values), keys=("key",)), values)
            return await _log.session_of(db, session_id)

    async def sessions_of(self, key: str, *, limit: int = 50) -> list[SessionRecord]:
        """The key's sessions, the most recently started first."""
        check_limit(limit)
        async with self._read(f"list the sessions of {key!r}") as db:
            return await _log.sessions_of_key(db, key, limit)


async def _named(db: AsyncConnection, key: str, name: str) -> bool:
    found = await db.execute(
        select(sessions.c.id).where(sessions.c.key == key, sessions.c.name == name)
    )
    return found.first() is not None


async def _copy_rows(db: AsyncConnection, source: str, fork: str) -> None:
    """Copy the messages, summaries, kept tool outputs and images of `source` into `fork`
    (a fork's messages refer to its own copies, so erasing either leaves the other whole)."""
    for table, columns in (
        (messages, ("seq", "role", "body", "created_at", "message_id", "author")),
        (summaries, ("up_to_seq", "text", "created_at")),
        (tool_outputs, ("call_id", "text", "created_at")),
        (images, ("digest", "media_type", "data", "created_at")),
    ):
        copied = select(literal(fork), *(table.c[column] for column in columns)).where(
            table.c.session_id == source
        )
        await db.execute(insert(table).from_select(["session_id", *columns], copied))
