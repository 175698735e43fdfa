"""Forked sessions: a chat's conversation copied into a new one that goes its own way, and the
list of a chat's sessions to switch between (`/fork`, `/sessions`, `/switch`).

A fork copies, in one transaction, the session's messages (with their seq, ids and authors),
its compaction summaries and the whole text of its cut tool results, and keeps its model and
the person of a direct conversation; it records the session it came from (`forked_from`), so
erasing a person reaches the copies of their words too (`core/store/people.py`). What the
original cost stays the original's: a fork's ledger starts empty.

Switching makes a session of the same key current (as `reopen_session` does) and counts as
activity (`updated_at`), so a session switched to is not started afresh at once by
`[sessions] reset_idle`.
"""

from __future__ import annotations

from typing import Protocol

from core.fencing import Fence
from core.store.log import SessionRecord

__all__ = ["SessionForks"]


class SessionForks(Protocol):
    """Forking a session, switching to another of its key, listing the key's sessions."""

    async def fork_session(
        self, session_id: str, *, name: str | None = None, fence: Fence | None = None
    ) -> SessionRecord:
        """A new session of the same key whose history begins as a copy of `session_id`'s;
        it becomes the key's current session, the original is kept as it is. Raises
        `StoreError` for an unknown session, or a `name` another session of the key has,
        `FenceOvertaken` for a fence older than one its key was written with."""
        ...

    async def switch_session(
        self, key: str, session_id: str, *, fence: Fence | None = None
    ) -> SessionRecord | None:
        """Make `session_id` the current session of `key`, its `updated_at` now; None (and
        nothing changed) if `key` has no session with that id, another key's included.
        Raises `FenceOvertaken` as `fork_session` does."""
        ...

    async def sessions_of(self, key: str, *, limit: int = 50) -> list[SessionRecord]:
        """The sessions of `key` (one chat's), the most recently started first."""
        ...
