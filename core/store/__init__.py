"""Storage: the `Store` protocol and its implementations.

`RedisStore` is imported on first use, so a process without Redis never loads redis-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.store.base import CompactionSummary, CostEntry, CostSummary, SessionRecord, Store
from core.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from core.store.redis import RedisStore

__all__ = [
    "CompactionSummary",
    "CostEntry",
    "CostSummary",
    "RedisStore",
    "SessionRecord",
    "SqliteStore",
    "Store",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from core.store.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
