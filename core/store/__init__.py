"""Storage: one small protocol per concern, the composite `Store`, and its implementations.

`core/store/base.py` lists the concerns and says how a new one is added. `SqlStore` is imported
from `core.backends.sql.store`, so a process that only needs the protocols never loads SQLAlchemy.
"""

from __future__ import annotations

from core.store.base import (
    AccessRecords,
    Approval,
    CheckpointStore,
    CompactionSummary,
    ConversationLog,
    CostEntry,
    CostLedger,
    CostSummary,
    FactStore,
    LastSeen,
    PairingAnswer,
    PairingRequest,
    PersonalRecords,
    PlaybookEntry,
    PlaybookRecords,
    PlaybookSequence,
    ProcessedMarks,
    ScheduleStore,
    SeenMarks,
    SessionForks,
    SessionRecord,
    Store,
    StoredImages,
    TurnClose,
    TurnOpening,
    TurnRecords,
    TurnStanding,
    TurnStart,
)

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
    "TurnClose",
    "TurnOpening",
    "TurnRecords",
    "TurnStanding",
    "TurnStart",
]
