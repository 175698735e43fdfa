"""The `ConversationLog` of `RedisStore`: sessions, messages, compaction summaries, and the
store's side of write fencing (`core/fencing.py`).

Each write is one script: a session's `seq` counter and its message list move together,
`current_session` cannot create two sessions for one key, and a fenced append checks the
session key's highest fencing epoch, raises it, and writes the message in one step. A session
keeps every summary it was given, one per archive marker (`up_to_seq`), in a hash, with a
sorted set of the markers so the latest is one lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Literal, cast
from uuid import uuid4

from pydantic import BaseModel

from core.errors import StoreError
from core.fencing import Fence, FenceOvertaken
from core.messages import Message
from core.store._redis_base import RANKED_MEMBER, RECEIPT_SECONDS, RedisBase, ranked_id, text
from core.store._shared import check_aware, check_limit, epoch_micros, from_utc_text, utc_text
from core.store.log import CompactionSummary, SessionRecord, new_session_id

__all__ = ["RedisLog"]

# A fresh session id colliding with a stored one is all but impossible; retry a few times.
_ID_ATTEMPTS: Final = 3

# KEYS: sessions_by_key, sessions_by_update, session_order, session(new id)
# ARGV: new id, key, now (text), now (epoch microseconds), "current" | "create" | "find",
#       and the prefixes of session and message-list keys (the newest session's are read by
#       name)
# Returns {0, id, key, created_at, updated_at, message count} for the key's newest session
# (its record read in the same step; {0, id} if it has none), {1, id} when it made one, {2}
# on an id clash, {3} when "find" found none (nothing is made then). A replay (same new id,
# key and time) finds the session it made and returns {1, id} again.
_OPEN_SESSION: Final = f"""
if ARGV[5] ~= 'create' then
  local newest = redis.call('ZREVRANGE', KEYS[1], 0, 0)[1]
  if newest then
    local record = ARGV[6] .. newest
    local fields = redis.call('HMGET', record, 'id', 'key', 'created_at', 'updated_at')
    if not fields[1] then return {{0, newest}} end
    return {{0, newest, fields[2], fields[3], fields[4], redis.call('LLEN', ARGV[7] .. newest)}}
  end
  if ARGV[5] == 'find' then return {{3}} end
end
local made = redis.call('HMGET', KEYS[4], 'key', 'created_at')
if made[1] then
  if made[1] == ARGV[2] and made[2] == ARGV[3] then return {{1, ARGV[1]}} end
  return {{2}}
end
local order = redis.call('INCR', KEYS[3])
local member = {RANKED_MEMBER.format(order="order", session_id="ARGV[1]")}
redis.call('HSET', KEYS[4], 'id', ARGV[1], 'key', ARGV[2], 'created_at', ARGV[3],
  'updated_at', ARGV[3], 'member', member)
redis.call('ZADD', KEYS[1], order, ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], member)
return {{1, ARGV[1]}}
"""

# KEYS: session, sessions_by_key of the session's key, session_order; ARGV: session id, key
# Ranks the session newest of its key (the order `_OPEN_SESSION` gives new ones); 0 when there
# is no such session of that key.
_REOPEN_SESSION: Final = """
if redis.call('HGET', KEYS[1], 'key') ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
return 1
"""

# KEYS: session, messages, message_seq, sessions_by_update, write_receipt[, fence]
# ARGV: now (text), now (epoch microseconds), message body (JSON), receipt lifetime (s),
#       fencing epoch ("" without a fence)
# Returns the new seq (a replay: the first run's), nil for an unknown session, -1 when the
# fence is older than one the session key's writes were seen with (a newer claim wrote).
_APPEND_MESSAGE: Final = """
local done = redis.call('GET', KEYS[5])
if done then return tonumber(done) end
local epoch = tonumber(ARGV[5])
if epoch and epoch < (tonumber(redis.call('GET', KEYS[6])) or 0) then return -1 end
local member = redis.call('HGET', KEYS[1], 'member')
if not member then return false end
if epoch then redis.call('SET', KEYS[6], string.format('%d', epoch)) end
local seq = redis.call('INCR', KEYS[3])
redis.call('RPUSH', KEYS[2], string.format('{"seq":%d,"created_at":"%s","body":%s}',
  seq, ARGV[1], ARGV[3]))
redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], member)
redis.call('SET', KEYS[5], seq, 'EX', ARGV[4])
return seq
"""

# KEYS: session, summaries, summary order
# ARGV: up_to_seq, summary (JSON)
# Returns 1, or 0 (nothing written) for an unknown session.
_SAVE: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[1])
return 1
"""

# KEYS: summaries, summary order
# Returns the JSON of the summary with the highest marker, or nil.
_LATEST: Final = """
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0)
if not top[1] then return false end
return redis.call('HGET', KEYS[1], top[1])
"""

# KEYS: summaries, summary order, messages
# Returns {the JSON of the latest summary or nil, the messages after its marker}.
_TAIL: Final = """
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0)[1]
local summary = false
local after = 0
if top then
  summary = redis.call('HGET', KEYS[1], top)
  after = tonumber(top)
end
return {summary, redis.call('LRANGE', KEYS[3], after, -1)}
"""

# KEYS: session, messages, message_seq, summaries, summary order, sessions_by_update;
# ARGV: session id, the prefix of sessions_by_key keys
# Returns 1, or 0 for an unknown session. The ledger's keys are left: spending outlives it.
# The key's index is named from ARGV (it is known only once the record is read); Redis Cluster
# is not supported anyway (several scripts span keys of different slots).
_DELETE_SESSION: Final = """
local found = redis.call('HMGET', KEYS[1], 'key', 'member')
if not found[1] then return 0 end
redis.call('ZREM', ARGV[2] .. found[1], ARGV[1])
if found[2] then redis.call('ZREM', KEYS[6], found[2]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return 1
"""

_SESSION_FIELDS: Final = ("id", "key", "created_at", "updated_at")


class _StoredMessage(BaseModel):
    """One entry of a session's message list: the body without `seq` and `created_at`."""

    seq: int
    created_at: datetime
    body: Message


class RedisLog(RedisBase):
    """The `ConversationLog` of `RedisStore`."""

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        with self._translated(f"create a session for {key!r}"):
            made = await self._open(key, mode="create")
        if made is None:
            raise StoreError(f"no session was made for {key!r}")
        return made

    async def current_session(self, key: str, *, new_id: str | None = None) -> SessionRecord:
        """The key's current session (the newest, or the one reopened last), created if the
        key has none yet (with `new_id` as its id when given)."""
        with self._translated(f"find the current session of {key!r}"):
            found = await self._open(key, mode="current", new_id=new_id)
        if found is None:
            raise StoreError(f"no current session for {key!r} was found or made")
        return found

    async def find_current_session(self, key: str) -> SessionRecord | None:
        """The key's current session, or None if it has none (nothing is created)."""
        with self._translated(f"find the current session of {key!r}"):
            return await self._open(key, mode="find")

    async def reopen_session(self, session_id: str) -> SessionRecord | None:
        """Make an earlier session its key's current one again; None if there is none."""
        with self._translated(f"reopen session {session_id!r}"):
            found = await self._read_sessions([session_id])
            if not found:
                return None
            record = found[0]
            keys = [
                self._keys.session(session_id),
                self._keys.sessions_by_key(record.key),
                self._keys.session_order(),
            ]
            await self._script(_REOPEN_SESSION)(keys=keys, args=[session_id, record.key])
            return record

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        with self._translated(f"read session {session_id!r}"):
            found = await self._read_sessions([session_id])
        return found[0] if found else None

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first (on equal times, the newer session first)."""
        check_limit(limit)
        if limit == 0:
            return []
        with self._translated("list sessions"):
            members = cast(
                list[bytes],
                await self._client.zrevrange(self._keys.sessions_by_update(), 0, limit - 1),
            )
            # Sessions are never deleted, so every listed id still has its hash.
            return await self._read_sessions([ranked_id(m) for m in members])

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        fence: Fence | None = None,
        receipt: str | None = None,
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        Raises `StoreError` for an unknown session, or for a `fence` older than one a write of
        its session key was seen with (checked, and the fence recorded, in the same script).
        """
        body = message.model_dump_json(exclude={"seq", "created_at"})
        with self._translated(f"append a message to session {session_id!r}"):
            now = self._now()
            keys = [
                self._keys.session(session_id),
                self._keys.messages(session_id),
                self._keys.message_seq(session_id),
                self._keys.sessions_by_update(),
                # A call made again with the caller's receipt finds the first one's answer.
                self._keys.write_receipt(f"m:{receipt}" if receipt else uuid4().hex),
            ]
            if fence is not None:
                keys.append(self._keys.fence(fence.session_key))
            seq = await self._script(_APPEND_MESSAGE)(
                keys=keys,
                args=[
                    utc_text(now),
                    epoch_micros(now),
                    body,
                    RECEIPT_SECONDS,
                    "" if fence is None else fence.epoch,
                ],
            )
        if seq is None:
            raise StoreError(f"cannot append a message: no session has id {session_id!r}")
        if int(seq) < 0:
            raise FenceOvertaken(
                f"cannot append to session {session_id!r}: the claim of"
                f" {fence.session_key if fence else '?'!r} was overtaken by a newer one"
            )
        return message.model_copy(update={"seq": int(seq), "created_at": now})

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        if limit is not None:
            check_limit(limit)
            if limit == 0:
                return []
        # `seq` is the list index plus one; a negative index would count from the end.
        start = max(after_seq, 0)
        stop = -1 if limit is None else start + limit - 1
        with self._translated(f"list the messages of session {session_id!r}"):
            raw = cast(
                list[bytes],
                await self._client.lrange(self._keys.messages(session_id), start, stop),
            )
            return [_decode_message(item) for item in raw]

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary; one with the same `up_to_seq` replaces the stored one.

        Raises `StoreError` for an unknown session or a naive time.
        """
        check_aware(summary, f"the summary of session {session_id!r}")
        with self._translated(f"save a summary of session {session_id!r}"):
            saved = await self._script(_SAVE)(
                keys=[
                    self._keys.session(session_id),
                    self._keys.summaries(session_id),
                    self._keys.summary_order(session_id),
                ],
                args=[summary.up_to_seq, summary.model_dump_json()],
            )
            if int(saved) != 1:
                raise StoreError(f"cannot save a summary: no session has id {session_id!r}")

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        with self._translated(f"read the summary of session {session_id!r}"):
            raw = await self._script(_LATEST)(
                keys=[self._keys.summaries(session_id), self._keys.summary_order(session_id)]
            )
            if raw is None:
                return None
            return CompactionSummary.model_validate_json(raw)

    async def summary_and_tail(
        self, session_id: str
    ) -> tuple[CompactionSummary | None, list[Message]]:
        """`latest_summary` and the messages after its marker (all of them without one), in
        one script."""
        with self._translated(f"read the summary and messages of session {session_id!r}"):
            raw, tail = await self._script(_TAIL)(
                keys=[
                    self._keys.summaries(session_id),
                    self._keys.summary_order(session_id),
                    self._keys.messages(session_id),
                ]
            )
            summary = None if raw is None else CompactionSummary.model_validate_json(raw)
            return summary, [_decode_message(item) for item in tail]

    async def summary_and_newer(
        self, session_id: str, *, after_seq: int
    ) -> tuple[CompactionSummary | None, list[Message]]:
        """`latest_summary` and the messages with `seq > after_seq`, asked for at once (one
        round trip: the client batches them)."""
        summary, newer = await asyncio.gather(
            self.latest_summary(session_id), self.list_messages(session_id, after_seq=after_seq)
        )
        return summary, newer

    async def delete_session(self, session_id: str) -> bool:
        """Delete the session's record, messages and summaries, and its place in the
        indexes, in one script; its ledger stays."""
        with self._translated(f"delete session {session_id!r}"):
            deleted = await self._script(_DELETE_SESSION)(
                keys=[
                    self._keys.session(session_id),
                    self._keys.messages(session_id),
                    self._keys.message_seq(session_id),
                    self._keys.summaries(session_id),
                    self._keys.summary_order(session_id),
                    self._keys.sessions_by_update(),
                ],
                args=[session_id, self._keys.sessions_by_key("")],
            )
        return bool(deleted)

    async def _open(
        self, key: str, *, mode: Literal["current", "create", "find"], new_id: str | None = None
    ) -> SessionRecord | None:
        """The key's newest session (`mode="current"`, made if it has none; `"find"`: None
        then) or a new one (`"create"`), atomically. A session made gets `new_id` when given
        (one attempt: an id already in use is an error), else a fresh id."""
        for _ in range(1 if new_id else _ID_ATTEMPTS):
            now = self._now()
            made_id = new_id or new_session_id()
            reply = await self._script(_OPEN_SESSION)(
                keys=[
                    self._keys.sessions_by_key(key),
                    self._keys.sessions_by_update(),
                    self._keys.session_order(),
                    self._keys.session(made_id),
                ],
                args=[
                    made_id,
                    key,
                    utc_text(now),
                    epoch_micros(now),
                    mode,
                    self._keys.session(""),
                    self._keys.messages(""),
                ],
            )
            outcome = int(reply[0])
            if outcome == 3:
                return None
            if outcome == 1:
                return SessionRecord(id=made_id, key=key, created_at=now, updated_at=now)
            if outcome == 0 and len(reply) == 6:
                return _session([reply[1], *reply[2:5]], int(reply[5]))
            if outcome == 0:
                found = await self._read_sessions([text(reply[1])])
                if not found:
                    raise StoreError(f"session {text(reply[1])!r} of {key!r} has no record")
                return found[0]
        if new_id:
            raise StoreError(f"session id {new_id!r} is already another session's")
        raise StoreError(f"no unused session id found in {_ID_ATTEMPTS} attempts")

    async def _read_sessions(self, session_ids: Sequence[str]) -> list[SessionRecord]:
        """The records of these sessions, in order, leaving out unknown ids."""
        if not session_ids:
            return []
        async with self._client.pipeline(transaction=True) as pipe:
            for session_id in session_ids:
                pipe.hmget(self._keys.session(session_id), list(_SESSION_FIELDS))
                pipe.llen(self._keys.messages(session_id))
            replies = await pipe.execute()
        records = []
        for fields, count in zip(replies[::2], replies[1::2], strict=True):
            if fields[0] is not None:
                records.append(_session(fields, count))
        return records


def _session(fields: Sequence[bytes], message_count: int) -> SessionRecord:
    session_id, key, created_at, updated_at = (text(f) for f in fields)
    return SessionRecord(
        id=session_id,
        key=key,
        created_at=from_utc_text(created_at),
        updated_at=from_utc_text(updated_at),
        message_count=message_count,
    )


def _decode_message(raw: bytes) -> Message:
    stored = _StoredMessage.model_validate_json(raw)
    return stored.body.model_copy(
        update={"seq": stored.seq, "created_at": stored.created_at.astimezone(UTC)}
    )
