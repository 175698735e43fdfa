"""The composite `Store`: every concern Switchboard keeps, for wiring a process together.

A store is a set of small protocols, one concern each, each in its own module:

| protocol | module | methods |
|---|---|---|
| `ConversationLog` | `core/store/log.py` | 12: sessions (reopened, deleted, model), messages |
| `CostLedger` | `core/store/ledger.py` | 7: entries, totals per session, person, chat, day, model |
| `ScheduleStore` | `core/store/schedules.py` | 10: schedules, their runs and their deliveries |
| `FactStore` | `core/store/facts.py` | 4: remembered facts, full-text search |
| `CheckpointStore` | `core/store/checkpoints.py` | 4 |
| `ProcessedMarks` | `core/store/processed.py` | 2 |
| `SeenMarks` | `core/store/seen.py` | 2: the newest message seen per conversation |
| `AccessRecords` | `core/store/access.py` | 7: pairing requests and approvals |
| `ReplyRecords` | `core/store/replies.py` | 3: what each streamed reply shows (delivery records) |
| `TurnRecords` | `core/store/turns.py` | 3: a turn's look-up, opening and closes (one each) |
| `ToolOutputs` | `core/store/tool_outputs.py` | 2: the whole text of tool results shown cut |
| `StoredImages` | `core/store/images.py` | 1: the bytes of the images messages refer to |
| `TakeoverRecords` | `core/store/takeovers.py` | 7: chats taken over, what is kept meanwhile |
| `PersonalRecords` | `core/store/people.py` | 2: one person's data, exported or erased |
| `PlaybookRecords` | `core/store/playbook.py` | 4: tool sequences that worked, per bot |
| `SessionForks` | `core/store/forks.py` | 3: a session forked, switched to; a chat's sessions |

Code that needs one concern takes that protocol (`ScheduleBook` a `ScheduleStore`, the fact
tools a `FactStore`); only the wiring in `bots/` and the parts that genuinely touch everything
take the composite. `SqlStore` is one class per concern (`core/backends/sql/store/_<concern>.py`)
sharing one connection pool, combined by inheritance; each protocol has its own contract test
module (`tests/contract/test_store_<concern>.py`), run on SQLite and on PostgreSQL.

`ReplyRecords` is used by gateways, not workers, and its `hold` is a cross-process lock as much
as a record, so it is not part of the composite: its implementations are classes of their own
(`core/backends/sql/store/_replies.py`; `HeldReplyRecords` puts SQL records under Redis holds,
`core/backends/redis/replies_hold.py`) that the backends open beside the store, and its contract
test is `tests/contract/test_store_replies.py`.

`SqlStore` (`core/backends/sql/store/`) is SQLAlchemy Core on its asyncio engine, on SQLite
(`sqlite3` called in line, decision 0028) or PostgreSQL (asyncpg), one transaction per call, its
schema made and upgraded by the Alembic revisions in `core/store/migrations/` when it opens
(docs/decisions/0001-records-in-sql.md).

Adding a concern (pairing, rate-limit state...):
1. a protocol module `core/store/<concern>.py` with its records;
2. `sql/_<concern>.py` (its tables in `sql/_tables.py` and a new Alembic revision in
   `core/store/migrations/versions/`), added to the bases of `SqlStore`;
3. `tests/contract/test_store_<concern>.py`, using the `store` fixture of the contract conftest;
4. the protocol added to the bases of `Store` below.

Write fencing is not a store concern of its own: a fenced write checks the `Fence` (an epoch
the mailbox's claim issues, `core/fencing.py`) against the highest one it saw for the session.
"""

from __future__ import annotations

from typing import Protocol

from core.fencing import Fence
from core.store.access import AccessRecords, Approval, PairingAnswer, PairingRequest
from core.store.checkpoints import CheckpointStore
from core.store.facts import FactStore
from core.store.forks import SessionForks
from core.store.images import StoredImages
from core.store.ledger import CostEntry, CostLedger, CostSummary
from core.store.log import CompactionSummary, ConversationLog, SessionRecord
from core.store.people import PersonalRecords
from core.store.playbook import PlaybookEntry, PlaybookRecords, PlaybookSequence
from core.store.processed import ProcessedMarks
from core.store.schedules import ScheduleStore
from core.store.seen import LastSeen, SeenMarks
from core.store.takeovers import Takeover, TakeoverRecords
from core.store.tool_outputs import ToolOutputs
from core.store.turns import TurnClose, TurnOpening, TurnRecords, TurnStanding, TurnStart

__all__ = [
    "AccessRecords",
    "Approval",
    "CheckpointStore",
    "CompactionSummary",
    "ConversationLog",
    "CostEntry",
    "CostLedger",
    "CostSummary",
    "FactStore",
    # Re-exported: callers that pass a claim's fence through may import it from here.
    "Fence",
    "LastSeen",
    "PairingAnswer",
    "PairingRequest",
    "PersonalRecords",
    "PlaybookEntry",
    "PlaybookRecords",
    "PlaybookSequence",
    "ProcessedMarks",
    "ScheduleStore",
    "SeenMarks",
    "SessionForks",
    "SessionRecord",
    "Store",
    "StoredImages",
    "Takeover",
    "TakeoverRecords",
    "ToolOutputs",
    "TurnClose",
    "TurnOpening",
    "TurnRecords",
    "TurnStanding",
    "TurnStart",
]


class Store(
    ConversationLog,
    CostLedger,
    ScheduleStore,
    FactStore,
    CheckpointStore,
    ProcessedMarks,
    SeenMarks,
    AccessRecords,
    TurnRecords,
    ToolOutputs,
    StoredImages,
    TakeoverRecords,
    PersonalRecords,
    PlaybookRecords,
    SessionForks,
    Protocol,
):
    """Durable state, every concern together. Every write is durable when the awaited call
    returns."""

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
