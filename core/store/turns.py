"""Turn records: what a turn reads and writes, as one unit of work each.

A person's message is looked up once (`turn_standing`: its processed mark, its checkpoint,
its session), a turn opens with one write (`open_turn`: the session, the checkpoint, the new
message, the history after what the caller holds) and every step closes with one
(`close_turn`: the step's messages, their cost entries, the checkpoint; at the turn's end the
processed mark and the checkpoint's status). Each is one transaction: a crash leaves all of a
call's writes or none of them, and every write may be made again (messages and cost entries
carry ids, marks and checkpoints are upserts), so a caller that lost an answer tries again.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from core.checkpoints import Checkpoint
from core.fencing import Fence
from core.messages import Message
from core.store.ledger import CostEntry
from core.store.log import CompactionSummary, SessionRecord
from core.store.takeovers import Takeover

__all__ = ["TurnClose", "TurnOpening", "TurnRecords", "TurnStanding", "TurnStart"]


class TurnStanding(BaseModel):
    """Where a person's message stands before anything is decided about it."""

    model_config = ConfigDict(frozen=True)

    processed: bool
    # Its checkpoint from before (a turn a crash cut off, or one abandoned), if any.
    checkpoint: Checkpoint | None = None
    # Its session key's current session, if it has one yet.
    session: SessionRecord | None = None
    # The chat's takeover, if one runs (`core/store/takeovers.py`): the bot answers nothing.
    takeover: Takeover | None = None


class TurnOpening(BaseModel):
    """What a turn starts with."""

    model_config = ConfigDict(frozen=True)

    # The session the turn runs in; when there is none with this id, the key's current one,
    # made under this id if the key has none yet.
    session_id: str
    session_key: str = ""
    # The person's message (or a schedule's prompt), with an id: stored unless the session's
    # newest person's message has the same `source` (the turn was started before: resumed).
    message: Message
    # Saved as the turn's `running` checkpoint (with the session's id), if given.
    checkpoint: Checkpoint | None = None
    # The caller holds the session's messages up to this seq: only newer ones are read.
    after_seq: int = 0
    # `<platform>:<user id>` of the person a direct conversation is with, kept with a session
    # made now (`switchboard people`); None for a group or a schedule's session.
    direct_with: str | None = None


class TurnStart(BaseModel):
    """What `open_turn` found and wrote."""

    model_config = ConfigDict(frozen=True)

    session: SessionRecord
    summary: CompactionSummary | None
    # The messages after `read_after` (the opening's `after_seq`, or the summary's marker when
    # that is later), oldest first, the new message last if it was stored.
    messages: list[Message]
    read_after: int
    # The message as stored (or as found, resumed) with its seq.
    message: Message
    # Whether the message was stored before (its turn is resumed, not started).
    resumed: bool
    checkpoint: Checkpoint | None = None


class TurnClose(BaseModel):
    """What a step or a turn leaves: written together."""

    model_config = ConfigDict(frozen=True)

    session_id: str = ""
    # Appended in order (one with an id the session holds already is not stored again).
    messages: list[Message] = []
    # Cost entries (one with an id recorded already is left as it is).
    costs: list[CostEntry] = []
    # Saved as it is (a tool round done), if given.
    checkpoint: Checkpoint | None = None
    # A run key: its inbound marked processed, and its checkpoint, if it has one still
    # running, `completed`.
    finished: str | None = None


class TurnRecords(Protocol):
    """A turn's reads and writes, one transaction per call."""

    async def turn_standing(
        self, run_key: str, session_key: str, *, chat: str | None = None
    ) -> TurnStanding:
        """The processed mark and checkpoint of `run_key`, the current session of
        `session_key` (nothing is created) and the running takeover of `chat` (if given),
        read together."""
        ...

    async def open_turn(self, opening: TurnOpening, *, fence: Fence | None = None) -> TurnStart:
        """Open a turn: find or make its session, save its checkpoint, store its message and
        read the history the caller lacks. Raises `StoreError` when there is no session with
        the id and no key to make one under, `FenceOvertaken` for a fence older than one its
        session key was written with."""
        ...

    async def close_turn(self, closing: TurnClose, *, fence: Fence | None = None) -> list[Message]:
        """Write what a step or a turn leaves; the messages as stored (with their seq).
        Raises `StoreError` for messages or costs of an unknown session, `FenceOvertaken` as
        `open_turn` does."""
        ...
