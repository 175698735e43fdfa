"""Storage: one small protocol per concern, the composite `Store`, and its implementations.

`core/store/base.py` lists the concerns and says how a new one is added.
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
    ProcessedMarks,
    ScheduleStore,
    SeenMarks,
    SessionRecord,
    Store,
)
from core.store.sqlite import SqliteStore

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
    "ProcessedMarks",
    "ScheduleStore",
    "SeenMarks",
    "SessionRecord",
    "SqliteStore",
    "Store",
]
