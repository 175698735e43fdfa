"""Reply records: what of one reply the chat shows, shared by every gateway of a platform.

A streamed reply reaches the gateways as pieces, each the whole text so far with a sequence
number (`Outbound.seq`); any gateway may take any piece. Before it shows one, a gateway holds
the reply (`ReplyRecords.hold`: one holder at a time, across processes), reads its record, skips
a piece older than what is shown, sends or edits the platform messages, and saves the record:
the newest sequence number shown, the platform message id of each message with a digest of
what it shows, and whether the final text is shown. So two gateways never both send the first
message, and a redelivered final reply is recognised as shown.

Records are keyed by the reply (`Outbound.reply_key`: the answered message's dedupe key, or
the delivery's own id for one nobody asked for) and kept for a day.

Implementations: `MemoryReplyRecords` (tests, the terminal), `SqlReplyRecords`
(`core/backends/sql/store/_replies.py`: records in the SQL database, held within one process), and
`HeldReplyRecords`, which puts the records of one implementation together with the holds of
another: in the distributed deployment, the records in the SQL database and the holds in Redis
(`core/backends/redis/replies_hold.py`), since a record must outlive a Redis restart and a hold
is only coordination.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from pydantic import BaseModel, ConfigDict

__all__ = [
    "REPLY_RECORD_VERSION",
    "HeldReplyRecords",
    "MemoryReplyRecords",
    "ReplyHolds",
    "ReplyRecord",
    "ReplyRecords",
    "ShownMessage",
    "digest",
]

REPLY_RECORD_VERSION = 1
# How long a record is kept: long past any redelivery of the reply's pieces.
RECORD_TTL_SECONDS = 24 * 3600


def digest(text: str) -> str:
    """A short fingerprint of a message's text (what a record keeps instead of the text)."""
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


class ShownMessage(BaseModel):
    """One platform message of a reply and a fingerprint of what it shows."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    digest: str


class ReplyRecord(BaseModel):
    """What the chat shows of one reply."""

    model_config = ConfigDict(frozen=True)

    key: str
    # The newest piece shown (`Outbound.seq`); -1 before any.
    seq: int = -1
    messages: tuple[ShownMessage, ...] = ()
    # The final text is shown: later pieces and redeliveries of it change nothing.
    finished: bool = False
    # The message (its index) whose send began and whose id is not recorded yet: it may have
    # reached the chat (the gateway died, or the answer was lost, after the platform took it).
    # Written before the send only for platforms that can look a sent message up.
    sending: int | None = None

    @property
    def message_ids(self) -> list[str]:
        """The platform ids of the reply's messages, in order."""
        return [shown.message_id for shown in self.messages]


class ReplyRecords(Protocol):
    """Where gateways keep reply records, and the per-reply hold that orders their writes."""

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, if any message of it was shown."""
        ...

    async def save(self, record: ReplyRecord) -> None:
        """Store `record` (call it while holding its reply)."""
        ...

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` for the block: no other holder (in any process) meanwhile.

        Raises `ChannelError` (not permanent) if the reply stays held by another too long.
        """
        ...


class ReplyHolds(Protocol):
    """The per-reply hold of `ReplyRecords`, on its own."""

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` for the block (see `ReplyRecords.hold`)."""
        ...


class HeldReplyRecords:
    """The records of `records` under the holds of `holds` (e.g. SQL records, Redis holds)."""

    def __init__(self, records: ReplyRecords, holds: ReplyHolds) -> None:
        self._records = records
        self._holds = holds

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, from `records`."""
        return await self._records.get(key)

    async def save(self, record: ReplyRecord) -> None:
        """Store `record` in `records`."""
        await self._records.save(record)

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` through `holds`."""
        return self._holds.hold(key)


class LocalHolds:
    """Per-key asyncio locks that are dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold `key` within this process."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
                del self._locks[key]


class MemoryReplyRecords:
    """Reply records in this process (the newest `capacity` of them)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._records: OrderedDict[str, ReplyRecord] = OrderedDict()
        self._capacity = capacity
        self._holds = LocalHolds()

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, if any."""
        return self._records.get(key)

    async def save(self, record: ReplyRecord) -> None:
        """Keep `record`, forgetting the oldest past `capacity`."""
        self._records[record.key] = record
        self._records.move_to_end(record.key)
        while len(self._records) > self._capacity:
            self._records.popitem(last=False)

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` (one process: an asyncio lock)."""
        return self._holds.hold(key)
