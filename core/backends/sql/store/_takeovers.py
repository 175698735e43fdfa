"""The `TakeoverRecords` of `SqlStore`: a row per chat (its newest takeover), and the
conversation writes made while one runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store import _log, _marks
from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import lock_for_transaction, upsert
from core.backends.sql.store._tables import sessions, takeovers
from core.envelopes import Address
from core.fencing import Fence
from core.messages import Message
from core.store._shared import from_utc_text, utc_text
from core.store.log import SessionRecord
from core.store.takeovers import Takeover, chat_of

__all__ = ["SqlTakeovers", "running_of"]

_t = takeovers.c
_TAKEOVER = select(_t.chat, _t.by, _t.since, _t.until, _t.ended_at)
_TAKEOVER_OF: Final = _TAKEOVER.where(_t.chat == bindparam("chat"))


class SqlTakeovers(SqlBase):
    """The `TakeoverRecords` of `SqlStore`."""

    async def take_over(self, takeover: Takeover) -> Takeover:
        """Start it; a running takeover of the chat keeps its `since`."""
        now = self._now()
        async with self._begin(f"take over {takeover.chat!r}") as db:
            before = _takeover(
                (await db.execute(_TAKEOVER.where(_t.chat == takeover.chat))).first()
            )
            if before is not None and before.active(now):
                takeover = takeover.model_copy(update={"since": before.since})
            kept = takeover.model_copy(update={"ended_at": None})
            values = {
                "chat": kept.chat,
                "by": kept.by,
                "since": utc_text(kept.since),
                "until": utc_text(kept.until),
                "ended_at": None,
            }
            await db.execute(
                upsert(self._dialect, takeovers, tuple(values), keys=("chat",)), values
            )
        return kept

    async def takeover_of(self, chat: str) -> Takeover | None:
        """The chat's newest takeover, or None."""
        async with self._read(f"read the takeover of {chat!r}") as db:
            return _takeover((await db.execute(_TAKEOVER.where(_t.chat == chat))).first())

    async def running_takeovers(self, now: datetime) -> list[Takeover]:
        """Takeovers running at `now`, oldest first."""
        query = _TAKEOVER.where(_t.ended_at.is_(None), _t.until > utc_text(now)).order_by(
            _t.since, _t.chat
        )
        async with self._read("list the running takeovers") as db:
            rows = (await db.execute(query)).all()
        return [found for row in rows if (found := _takeover(row)) is not None]

    async def hand_back(self, chat: str, now: datetime) -> Takeover | None:
        """End the chat's running takeover."""
        async with self._begin(f"hand back {chat!r}") as db:
            found = await running_of(db, chat, now)
            if found is None:
                return None
            await db.execute(
                update(takeovers).where(_t.chat == chat).values(ended_at=utc_text(now))
            )
        return found.model_copy(update={"ended_at": now})

    async def end_expired(self, now: datetime) -> list[Takeover]:
        """End the takeovers past their `until`; each one ended now, at its `until`."""
        async with self._begin("end the expired takeovers") as db:
            expired = (
                await db.execute(
                    update(takeovers)
                    .where(_t.ended_at.is_(None), _t.until <= utc_text(now))
                    .values(ended_at=_t.until)
                    .returning(_t.chat, _t.by, _t.since, _t.until, _t.ended_at)
                )
            ).all()
        ended = [found for row in expired if (found := _takeover(row)) is not None]
        return sorted(ended, key=lambda found: (found.until, found.chat))

    async def keep_message(
        self,
        session_key: str,
        session_id: str,
        message: Message,
        *,
        finished: str,
        fence: Fence | None = None,
    ) -> Message:
        """Store a person's message and mark it processed, once."""
        now = self._now()
        async with self._begin(f"keep a message of {session_key!r}") as db:
            if fence is not None:
                await _log.check_fence(db, self._dialect, fence)
            session = await _current_or_made(db, self._dialect, session_key, session_id, now)
            if not await _marks.mark(db, self._dialect, finished, now):
                return message  # kept before: its answer was lost, not its write
            return await _log.append(db, session.id, message, now)

    async def keep_operator_message(
        self, address: Address, message: Message, *, session_id: str | None
    ) -> Message | None:
        """Store the operator's message in the chat's current session."""
        now = self._now()
        async with self._begin(f"keep the operator's message in {address}") as db:
            key = await _key_of_chat(db, address)
            if session_id is None and await _log.current_of(db, key) is None:
                return None
            made = session_id or ""
            session = await _current_or_made(db, self._dialect, key, made, now)
            return await _log.append(db, session.id, message, now)


async def running_of(db: AsyncConnection, chat: str, now: datetime) -> Takeover | None:
    """The chat's takeover if it runs at `now`, in the transaction of `db`."""
    found = _takeover((await db.execute(_TAKEOVER_OF, {"chat": chat})).first())
    return found if found is not None and found.active(now) else None


async def _current_or_made(
    db: AsyncConnection, dialect: str, key: str, session_id: str, now: datetime
) -> SessionRecord:
    """The key's current session, made under `session_id` if it has none."""
    await lock_for_transaction(dialect, db, f"session:{key}")
    found = await _log.current_of(db, key)
    if found is not None:
        return found
    return await _log.insert_session(db, key, session_id, now)


async def _key_of_chat(db: AsyncConnection, address: Address) -> str:
    """The session key of the chat `address` names, whichever bot's key is in it (the newest
    session's); the address's own key when the chat has no session yet."""
    _platform, _, chat = chat_of(address).partition(":")
    rows = await db.execute(
        select(sessions.c.key)
        .where(sessions.c.key.like(f"{address.platform}:%:{chat}"))
        .order_by(sessions.c.updated_at.desc(), sessions.c.number.desc())
    )
    for (key,) in rows:
        # `<platform>:<bot>:<chat>[:<thread>]`: LIKE's `%` and `_` may match more than that.
        platform, bot, rest = str(key).split(":", 2) if str(key).count(":") >= 2 else ("", "", "")
        if platform == address.platform and bot and rest == chat:
            return str(key)
    return address.session_key


def _takeover(row: Any) -> Takeover | None:
    if row is None:
        return None
    chat, by, since, until, ended_at = row
    return Takeover(
        chat=chat,
        by=by,
        since=from_utc_text(since),
        until=from_utc_text(until),
        ended_at=None if ended_at is None else from_utc_text(ended_at),
    )
