"""Storage: one small protocol per concern, the composite `Store`, and its implementations.

`core/store/base.py` lists the concerns and says how a new one is added. `SqlStore` is imported
from `core.store.sql`, so a process that only needs the protocols never loads SQLAlchemy.

`RedisStore` is imported on first use, so a process without Redis never loads redis-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from core.store.redis import RedisStore

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
    "RedisStore",
    "ScheduleStore",
    "SeenMarks",
    "SessionRecord",
    "Store",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from core.store.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
