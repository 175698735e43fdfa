"""One person's data, on request: everything kept about them, and erasing it.

A person is `<platform>:<user id>` (`Person`). What is theirs: their direct conversations
(sessions whose `direct_with` is them, or, for sessions from before that was kept, whose key's
chat is their id), their own messages in group conversations (`Message.author`, or the
messages of their turns' checkpoints, and the copies of those in sessions forked from them,
`core/store/forks.py`), their remembered facts (scope
`<profile>:<platform>:<user id>`), the schedules they own with their runs and sessions, their
pairing requests and approval, their turns' checkpoints, and the ledger entries of their calls.

Erasing deletes all of it but two things: a group's history keeps a tombstone in place of each
message of their turns (their message and the answers to it, which may repeat their words; the
tool calls keep their ids and names, so calls and results still pair up and the history stays
well-formed), and the ledger keeps their entries with the person (and the chat, in their direct
conversations) taken off, so every total still adds up. Then the database gives the freed
bytes back (`secure_delete` and `VACUUM` on SQLite, the full-text index merged first; `VACUUM
FULL` of the touched tables on PostgreSQL).
"""

from __future__ import annotations

import re
from typing import Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

from core.facts import MemoryFact
from core.messages import Message
from core.scheduling.models import Schedule, ScheduleRun
from core.store.access import Approval, PairingRequest
from core.store.ledger import CostEntry

__all__ = [
    "TOMBSTONE",
    "Conversation",
    "Erasure",
    "Person",
    "PersonalData",
    "PersonalRecords",
]

# What stands in a group's history for a message of a forgotten person's turn (theirs, and
# the answers to it, which may repeat their words).
TOMBSTONE = "[removed at the request of the person this turn was with]"

_PART = re.compile(r"[^:\s]+")


class Person(BaseModel):
    """Someone on one platform: `<platform>:<user id>`."""

    model_config = ConfigDict(frozen=True)

    platform: str = Field(pattern=_PART.pattern)
    user_id: str = Field(pattern=_PART.pattern)

    @classmethod
    def parse(cls, text: str) -> Self:
        """The person `PLATFORM:USER_ID` names; `ValueError` otherwise."""
        platform, _, user_id = text.strip().partition(":")
        if not _PART.fullmatch(platform) or not _PART.fullmatch(user_id):
            raise ValueError(f"{text!r} is not a person; use PLATFORM:USER_ID, like telegram:42")
        return cls(platform=platform.lower(), user_id=user_id)

    def __str__(self) -> str:
        return f"{self.platform}:{self.user_id}"

    def owns_scope(self, scope: str) -> bool:
        """Whether a fact scope (`<profile>:<platform>:<user id>`) is this person's."""
        _profile, _, rest = scope.partition(":")
        return rest == str(self)

    def owns_key(self, session_key: str) -> bool:
        """Whether a session key (`<platform>:<bot>:<chat>[:<thread>]`) is a direct
        conversation with this person, on platforms whose DM's chat is the person's id."""
        parts = session_key.split(":")
        return len(parts) >= 3 and parts[0] == self.platform and parts[2] == self.user_id


class Conversation(BaseModel):
    """A session and the messages of it that belong in an export."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    key: str
    messages: list[Message] = Field(default_factory=list)


class PersonalData(BaseModel):
    """Everything kept about one person (`switchboard people export`)."""

    model_config = ConfigDict(frozen=True)

    person: str
    direct_conversations: list[Conversation] = Field(default_factory=list)
    # Group conversations, with only the person's turns in each (their messages, the answers).
    group_messages: list[Conversation] = Field(default_factory=list)
    facts: list[MemoryFact] = Field(default_factory=list)
    schedules: list[Schedule] = Field(default_factory=list)
    schedule_runs: list[ScheduleRun] = Field(default_factory=list)
    pairing_requests: list[PairingRequest] = Field(default_factory=list)
    approvals: list[Approval] = Field(default_factory=list)
    # The inbound messages of their turns a checkpoint still holds (recovery records).
    turn_records: list[dict[str, Any]] = Field(default_factory=list)
    costs: list[CostEntry] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether nothing at all is kept about the person."""
        return not any(getattr(self, name) for name in type(self).model_fields if name != "person")


class Erasure(BaseModel):
    """What `erase_person` did, counted."""

    model_config = ConfigDict(frozen=True)

    sessions_deleted: int = 0
    # Messages of their turns in groups: theirs and the answers to them.
    messages_tombstoned: int = 0
    facts_deleted: int = 0
    schedules_deleted: int = 0
    access_records_deleted: int = 0
    checkpoints_deleted: int = 0
    costs_anonymised: int = 0
    # Whether the database gave the freed bytes back (False: it could not, e.g. another
    # process held the SQLite file's write-ahead log; run `people forget` again later).
    compacted: bool = False


class PersonalRecords(Protocol):
    """One person's data: read all of it, or erase it."""

    async def personal_data(self, person: Person) -> PersonalData:
        """Everything kept about `person` (nothing is changed)."""
        ...

    async def erase_person(self, person: Person) -> Erasure:
        """Erase `person` as the module says, in one transaction, then compact the database
        so the bytes are gone from its files. Erasing someone twice finds nothing the second
        time and is harmless."""
        ...
