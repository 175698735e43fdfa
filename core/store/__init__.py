"""Storage: the `Store` protocol and its implementations."""

from __future__ import annotations

from core.store.base import SessionRecord, Store
from core.store.sqlite import SqliteStore

__all__ = ["SessionRecord", "SqliteStore", "Store"]
