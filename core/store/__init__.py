"""Storage: the `Store` protocol and its implementations."""

from __future__ import annotations

from core.store.base import CompactionSummary, CostEntry, CostSummary, SessionRecord, Store
from core.store.redis import RedisStore
from core.store.sqlite import SqliteStore

__all__ = [
    "CompactionSummary",
    "CostEntry",
    "CostSummary",
    "RedisStore",
    "SessionRecord",
    "SqliteStore",
    "Store",
]
