"""Backends: where the records are kept and how work moves, one package per deployment.

- `core/backends/sql/` (`open_embedded`): the records in the SQL store, the bus and the
  mailboxes in a SQLite queue file and this process. One machine; `serve` and the terminal chat.
- `core/backends/redis/` (`open_distributed`): the records in the SQL store, the bus, the
  mailboxes, their leases and the holds on replies in Redis. Any number of processes.

Each opening function takes plain arguments (URLs, paths, keys, leases) and yields `Backends`;
the protocols they implement stay with their concern (`core/bus/base.py`,
`core/mailbox/base.py`, `core/store/base.py`). Nothing here is imported until a process opens a
deployment, so one without Redis never loads redis-py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.metrics import Metrics
from core.readiness import Readiness

if TYPE_CHECKING:
    from core.backends.redis.client import AnyRedis
    from core.bus.base import Bus
    from core.mailbox.base import Mailboxes
    from core.store.base import Store
    from core.store.replies import ReplyRecords

__all__ = ["Backends", "store_readiness"]


@dataclass
class Backends:
    """Where history is kept and how work moves."""

    store: Store
    bus: Bus
    mailboxes: Mailboxes
    # What each reply shows, shared by the gateways that show it (`core/store/replies.py`).
    replies: ReplyRecords
    distributed: bool
    # The process's readiness: its loops report to it, and it asks the store and the bus.
    readiness: Readiness
    # The process's metrics: the parts built on these backends record into it.
    metrics: Metrics = field(default_factory=Metrics)
    # The Redis client the bus, the mailboxes, the reply holds and the rate limits' counters
    # share (None without Redis).
    redis: AnyRedis | None = None


def store_readiness(store: Store) -> Readiness:
    """A process's readiness, asking the store for a cheap read (the distributed deployment
    adds a PING of the bus)."""
    readiness = Readiness()

    async def store_answers() -> None:
        await store.list_sessions(limit=1)

    readiness.add_check("store", store_answers)
    return readiness
