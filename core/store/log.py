"""The conversation log: sessions, their messages (written through, one at a time) and the
compaction summaries that stand in for a session's older messages."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from core.fencing import Fence
from core.messages import Message

__all__ = ["CompactionSummary", "ConversationLog", "SessionRecord", "new_session_id"]


def new_session_id() -> str:
    """A fresh session id (12 hex digits), as the stores make them."""
    return uuid4().hex[:12]


class SessionRecord(BaseModel):
    """A stored conversation. Several sessions may share a key: `/new` starts another."""

    model_config = ConfigDict(frozen=True)

    id: str
    key: str
    created_at: datetime
    updated_at: datetime
    message_count: int = 0
    # The model `/model` chose for this session (an entry of `[models] allowed`); None: the
    # profile's default.
    model: str | None = None
    # Raised when its stored messages are rewritten in place (`switchboard people forget`).
    revision: int = 0
    # What `/fork NAME` called it; None: unnamed.
    name: str | None = None
    # The session whose history this one began as a copy of (`/fork`); None: not a fork.
    forked_from: str | None = None


class CompactionSummary(BaseModel):
    """A summary of a session's messages up to `up_to_seq`, standing in for them in requests.

    `up_to_seq` is the archive marker: later requests send the summary and the messages after
    it. The messages themselves stay in the store.
    """

    model_config = ConfigDict(frozen=True)

    up_to_seq: int = Field(ge=1)
    text: str
    created_at: datetime


class ConversationLog(Protocol):
    """Sessions, their messages and their compaction summaries."""

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        ...

    async def current_session(self, key: str, *, new_id: str | None = None) -> SessionRecord:
        """The key's current session (the newest, or the one reopened last), created if the
        key has none yet: with `new_id` as its id when given (from `new_session_id`), so a
        caller may start writing under that id before the answer is back. The id of what is
        returned is the truth: another caller may have made the key's session first. Raises
        `StoreError` if `new_id` is already another session's."""
        ...

    async def find_current_session(self, key: str) -> SessionRecord | None:
        """The key's current session, or None if it has none (nothing is created)."""
        ...

    async def reopen_session(self, session_id: str) -> SessionRecord | None:
        """Make an earlier session its key's current one again (a conversation resumed after
        `/new`); None if there is no such session. A later `create_session` supersedes it."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        ...

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first."""
        ...

    async def set_session_model(self, session_id: str, model: str | None) -> bool:
        """Keep `model` as the session's chosen model (None: back to the default); False if
        there is no such session."""
        ...

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        fence: Fence | None = None,
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        `seq` starts at 1 and grows by one per message of the session. Raises `StoreError` for
        an unknown session, and when `fence` is older than a fence this store already saw for
        its session key (a newer claim wrote since); otherwise `fence` becomes the newest seen.
        The check and the write are one atomic step. A message with an `id` the session holds
        already is not stored again: the stored one is returned (a caller trying again after an
        outage, the first try's answer lost though it was stored).

        The bytes of its images are kept apart, once per session and digest (`StoredImages`,
        `core/stored_images.py`): the message is stored, and returned, with a reference to
        each instead (`ImagePart.ref`, its size, no bytes).
        """
        ...

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        ...

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary of the session; one with the same `up_to_seq` replaces
        the stored one. Raises `StoreError` for an unknown session or a naive time."""
        ...

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Delete the session: its record, messages and summaries (an operator's `sessions
        delete`). Its cost ledger entries stay: what was spent was spent. False if there is
        no such session; its key's next turn starts a new session."""
        ...
