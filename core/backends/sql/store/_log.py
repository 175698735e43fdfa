"""The `ConversationLog` of `SqlStore`: sessions, messages, compaction summaries, and the
fencing epochs its fenced writes check (`core/fencing.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from sqlalchemy import String, Text, bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import insert_ignoring, lock_for_transaction, upsert
from core.backends.sql.store._tables import (
    fences,
    images,
    messages,
    reopened,
    sessions,
    summaries,
    tool_outputs,
)
from core.errors import StoreError
from core.fencing import Fence, FenceOvertaken
from core.messages import ImagePart, Message, TextPart
from core.store._shared import check_aware, check_limit, from_utc_text, utc_text
from core.store.log import CompactionSummary, SessionRecord, new_session_id
from core.stored_images import kept_apart

__all__ = [
    "SqlLog",
    "append",
    "check_fence",
    "current_of",
    "insert_session",
    "messages_after",
    "newest_asked",
    "session_of",
    "sessions_of_key",
    "summary_of",
    "with_image_bytes",
]

_s = sessions
# Every read of a session fills `message_count`.
_COUNT = (
    select(func.count())
    .select_from(messages)
    .where(messages.c.session_id == _s.c.id)
    .scalar_subquery()
)
_SESSION = select(
    _s.c.id,
    _s.c.key,
    _s.c.created_at,
    _s.c.updated_at,
    _COUNT,
    _s.c.model,
    _s.c.revision,
    _s.c.name,
    _s.c.forked_from,
)


m = messages.c
# The statements a turn runs, built once (executed with their values as parameters).
_SESSION_OF: Final = _SESSION.where(_s.c.id == bindparam("id"))
_CURRENT_OF: Final = _SESSION.where(
    _s.c.id
    == func.coalesce(
        select(reopened.c.session_id).where(reopened.c.key == bindparam("key")).scalar_subquery(),
        select(_s.c.id)
        .where(_s.c.key == bindparam("key"))
        .order_by(_s.c.created_at.desc(), _s.c.number.desc())
        .limit(1)
        .scalar_subquery(),
    )
)
_MESSAGES_AFTER: Final = (
    select(m.seq, m.body, m.created_at)
    .where(m.session_id == bindparam("id"), m.seq > bindparam("after"))
    .order_by(m.seq)
)
_NEWEST_ASKED: Final = (
    select(m.seq, m.body, m.created_at)
    .where(m.session_id == bindparam("id"), m.role == "user")
    .order_by(m.seq.desc())
    .limit(1)
)
_SUMMARY_OF: Final = (
    select(summaries.c.up_to_seq, summaries.c.text, summaries.c.created_at)
    .where(summaries.c.session_id == bindparam("id"))
    .order_by(summaries.c.up_to_seq.desc())
    .limit(1)
)
_TOUCH: Final = (
    update(_s)
    .where(_s.c.id == bindparam("b_id"))
    .values(updated_at=bindparam("b_at"))
    .returning(_s.c.id)
)
_STORED_BEFORE: Final = select(m.seq, m.created_at).where(
    m.session_id == bindparam("b_id"), m.message_id == bindparam("b_message_id")
)
_APPEND: Final = (
    insert(messages)
    .from_select(
        ["session_id", "seq", "role", "body", "created_at", "message_id", "author"],
        select(
            bindparam("b_id", type_=String),
            func.coalesce(func.max(m.seq), 0) + 1,
            bindparam("b_role", type_=String),
            bindparam("b_body", type_=Text),
            bindparam("b_at", type_=String),
            bindparam("b_message_id", type_=String),
            bindparam("b_author", type_=String),
        ).where(m.session_id == bindparam("b_id")),
    )
    .returning(m.seq)
)
_FENCE_EPOCH: Final = (
    select(fences.c.epoch).where(fences.c.session_key == bindparam("key")).with_for_update()
)


class SqlLog(SqlBase):
    """The `ConversationLog` of `SqlStore`."""

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        async with self._begin(f"create a session for {key!r}") as db:
            await db.execute(delete(reopened).where(reopened.c.key == key))
            return await insert_session(db, key, new_session_id(), self._now())

    async def current_session(self, key: str, *, new_id: str | None = None) -> SessionRecord:
        """The key's current session (the newest, or the one reopened last), created if the
        key has none yet (with `new_id` as its id when given)."""
        async with self._begin(f"find the current session of {key!r}") as db:
            # Two callers asking at once for a key without a session make one, not two.
            await lock_for_transaction(self._dialect, db, f"session:{key}")
            found = await current_of(db, key)
            return (
                found
                if found is not None
                else await insert_session(db, key, new_id or new_session_id(), self._now())
            )

    async def find_current_session(self, key: str) -> SessionRecord | None:
        """The key's current session, or None if it has none (nothing is created)."""
        async with self._read(f"find the current session of {key!r}") as db:
            return await current_of(db, key)

    async def reopen_session(self, session_id: str) -> SessionRecord | None:
        """Make an earlier session its key's current one again; None if there is none."""
        async with self._begin(f"reopen session {session_id!r}") as db:
            found = _first(await db.execute(_SESSION.where(_s.c.id == session_id)))
            if found is not None:
                values = {"key": found.key, "session_id": found.id}
                await db.execute(
                    upsert(self._dialect, reopened, tuple(values), keys=("key",)), values
                )
            return found

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        async with self._read(f"read session {session_id!r}") as db:
            return _first(await db.execute(_SESSION.where(_s.c.id == session_id)))

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first."""
        check_limit(limit)
        async with self._read("list sessions") as db:
            rows = await db.execute(
                _SESSION.order_by(_s.c.updated_at.desc(), _s.c.number.desc()).limit(limit)
            )
            return [_session(row) for row in rows]

    async def set_session_model(self, session_id: str, model: str | None) -> bool:
        """Keep `model` as the session's chosen model (None: the default); False if none."""
        async with self._begin(f"set the model of session {session_id!r}") as db:
            changed = await db.execute(
                update(_s).where(_s.c.id == session_id).values(model=model).returning(_s.c.id)
            )
            return changed.first() is not None

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        fence: Fence | None = None,
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        Raises `StoreError` for an unknown session, and `FenceOvertaken` for a `fence` older
        than one a write of its session key was seen with.
        """
        now = self._now()
        async with self._begin(f"append a message to session {session_id!r}") as db:
            if fence is not None:
                await check_fence(db, self._dialect, fence)
            return await append(db, session_id, message, now)

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        if limit is not None:
            check_limit(limit)
        async with self._read(f"list the messages of session {session_id!r}") as db:
            return await messages_after(db, session_id, after_seq, limit)

    async def image(self, session_id: str, digest: str) -> bytes | None:
        """The bytes of the image `digest` of `session_id`, or None."""
        query = select(images.c.data).where(
            images.c.session_id == session_id, images.c.digest == digest
        )
        async with self._read(f"read an image of session {session_id!r}") as db:
            found = (await db.execute(query)).first()
        return None if found is None else bytes(found[0])

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary; one with the same `up_to_seq` replaces the stored one.

        Raises `StoreError` for an unknown session or a naive time.
        """
        check_aware(summary, f"the summary of session {session_id!r}")
        async with self._begin(f"save a summary of session {session_id!r}") as db:
            known = await db.execute(select(_s.c.id).where(_s.c.id == session_id))
            if known.first() is None:
                raise StoreError(f"cannot save a summary: no session has id {session_id!r}")
            values = {
                "session_id": session_id,
                "up_to_seq": summary.up_to_seq,
                "text": summary.text,
                "created_at": utc_text(summary.created_at),
            }
            statement = upsert(
                self._dialect, summaries, tuple(values), keys=("session_id", "up_to_seq")
            )
            await db.execute(statement, values)

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        async with self._read(f"read the summary of session {session_id!r}") as db:
            return await summary_of(db, session_id)

    async def delete_session(self, session_id: str) -> bool:
        """Delete the session's record, messages, summaries, reopen mark, kept tool outputs and
        images; keep its costs."""
        async with self._begin(f"delete session {session_id!r}") as db:
            for table in (messages, summaries, reopened, tool_outputs, images):
                await db.execute(delete(table).where(table.c.session_id == session_id))
            deleted = await db.execute(delete(_s).where(_s.c.id == session_id))
            return deleted.rowcount == 1


async def insert_session(
    db: AsyncConnection,
    key: str,
    session_id: str,
    now: datetime,
    *,
    direct_with: str | None = None,
) -> SessionRecord:
    """A new session of `key` under `session_id` (`direct_with`: the person of a DM)."""
    record = SessionRecord(id=session_id, key=key, created_at=now, updated_at=now)
    at = utc_text(now)
    await db.execute(
        insert(_s).values(
            id=record.id, key=key, created_at=at, updated_at=at, direct_with=direct_with
        )
    )
    return record


async def session_of(db: AsyncConnection, session_id: str) -> SessionRecord | None:
    """The session with this id, or None."""
    return _first(await db.execute(_SESSION_OF, {"id": session_id}))


async def sessions_of_key(db: AsyncConnection, key: str, limit: int) -> list[SessionRecord]:
    """The key's sessions, the most recently started first."""
    rows = await db.execute(
        _SESSION.where(_s.c.key == key)
        .order_by(_s.c.created_at.desc(), _s.c.number.desc())
        .limit(limit)
    )
    return [_session(row) for row in rows]


async def current_of(db: AsyncConnection, key: str) -> SessionRecord | None:
    """The key's reopened session, else its newest."""
    return _first(await db.execute(_CURRENT_OF, {"key": key}))


async def messages_after(
    db: AsyncConnection, session_id: str, after_seq: int, limit: int | None
) -> list[Message]:
    query = _MESSAGES_AFTER if limit is None else _MESSAGES_AFTER.limit(limit)
    return [
        Message.model_validate_json(body).model_copy(
            update={"seq": seq, "created_at": from_utc_text(created_at)}
        )
        for seq, body, created_at in await db.execute(query, {"id": session_id, "after": after_seq})
    ]


async def with_image_bytes(
    db: AsyncConnection, session_id: str, stored: list[Message]
) -> list[Message]:
    """`stored` with the bytes of every image they refer to that is kept (for an export)."""
    result = []
    for message in stored:
        if any(image.ref and not image.data for image in message.images):
            content = [await _filled(db, session_id, part) for part in message.content]
            message = message.model_copy(update={"content": content})
        result.append(message)
    return result


async def _filled(
    db: AsyncConnection, session_id: str, part: TextPart | ImagePart
) -> TextPart | ImagePart:
    if not isinstance(part, ImagePart) or not part.ref or part.data:
        return part
    found = await db.scalar(
        select(images.c.data).where(images.c.session_id == session_id, images.c.digest == part.ref)
    )
    return part if found is None else part.model_copy(update={"data": bytes(found)})


async def summary_of(db: AsyncConnection, session_id: str) -> CompactionSummary | None:
    row = (await db.execute(_SUMMARY_OF, {"id": session_id})).first()
    if row is None:
        return None
    return CompactionSummary(up_to_seq=row[0], text=row[1], created_at=from_utc_text(row[2]))


def _session(row: Sequence[Any]) -> SessionRecord:
    session_id, key, created_at, updated_at, message_count, model, revision, name, forked = row
    return SessionRecord(
        id=session_id,
        key=key,
        created_at=from_utc_text(created_at),
        updated_at=from_utc_text(updated_at),
        message_count=message_count,
        model=model,
        revision=revision,
        name=name,
        forked_from=forked,
    )


def _first(result: Any) -> SessionRecord | None:
    row = result.first()
    return None if row is None else _session(row)


async def check_fence(db: AsyncConnection, dialect: str, fence: Fence) -> None:
    """Record `fence` as its key's newest, or raise `FenceOvertaken` if a newer one wrote."""
    values = {"session_key": fence.session_key, "epoch": fence.epoch}
    statement = upsert(dialect, fences, tuple(values), keys=("session_key",), newer="epoch")
    await db.execute(statement, values)
    seen = (await db.execute(_FENCE_EPOCH, {"key": fence.session_key})).scalar_one()
    if fence.epoch < seen:
        raise FenceOvertaken(
            f"cannot write to {fence.session_key!r}: its claim was overtaken"
            f" (epoch {fence.epoch} < {seen})"
        )


async def append(db: AsyncConnection, session_id: str, message: Message, now: datetime) -> Message:
    """Store `message` at the end of the session (`ConversationLog.append_message`), in the
    transaction of `db`; its fence checked already."""
    at = utc_text(now)
    # Moving the session's `updated_at` first also locks its row (on PostgreSQL; SQLite holds
    # the write lock already): appends to one session take turns for the next seq.
    touched = await db.execute(_TOUCH, {"b_id": session_id, "b_at": at})
    if touched.first() is None:
        raise StoreError(f"cannot append a message: no session has id {session_id!r}")
    # The images are kept once each, apart; the stored body holds their references.
    message, kept = kept_apart(message)
    if message.id is not None:
        # A write tried again after its answer was lost: the first one stands.
        stored_before = (
            await db.execute(_STORED_BEFORE, {"b_id": session_id, "b_message_id": message.id})
        ).first()
        if stored_before is not None:
            seq, created_at = stored_before
            return message.model_copy(
                update={"seq": int(seq), "created_at": from_utc_text(created_at)}
            )
    for image in kept:
        values = {
            "session_id": session_id,
            "digest": image.ref,
            "media_type": image.media_type,
            "data": image.data,
            "created_at": at,
        }
        await db.execute(insert_ignoring(db.dialect.name, images), values)
    values = {
        "b_id": session_id,
        "b_role": message.role,
        "b_body": message.model_dump_json(exclude={"seq", "created_at"}),
        "b_at": at,
        "b_message_id": message.id,
        "b_author": message.author,
    }
    seq = (await db.execute(_APPEND, values)).scalar_one()
    return message.model_copy(update={"seq": int(seq), "created_at": now})


async def newest_asked(db: AsyncConnection, session_id: str) -> Message | None:
    """The session's newest person's message (role `user`), or None."""
    row = (await db.execute(_NEWEST_ASKED, {"id": session_id})).first()
    if row is None:
        return None
    seq, body, created_at = row
    return Message.model_validate_json(body).model_copy(
        update={"seq": seq, "created_at": from_utc_text(created_at)}
    )
