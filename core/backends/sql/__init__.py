"""The embedded deployment's backends: SQL records, SQLite queues.

- `store/`: `SqlStore`, every record concern on SQLAlchemy Core, on SQLite or PostgreSQL (its
  schema's migrations are `core/store/migrations/`).
- `bus.py`: `SqliteBus`, durable queues in a SQLite file and topics in the process
  (`local_topics.py`, `_bus_topics.py`).
- `mailboxes.py`: `SqliteMailboxes`, the sessions' mailboxes and claims in the same file.

`open_embedded` opens them together. Its modules are imported when it runs, so importing
`core.backends.sql.store` alone does not load the queues (nor the other way round).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from core.backends import Backends, store_readiness

__all__ = ["open_embedded"]


@asynccontextmanager
async def open_embedded(
    store_url: str,
    queue_path: Path,
    *,
    lease_seconds: float,
    take_over: bool = False,
    shared_topics: Collection[str] = frozenset(),
) -> AsyncIterator[Backends]:
    """The store at `store_url` (schema upgraded) and a bus and mailboxes in the SQLite file
    at `queue_path`, closed when the block ends.

    `lease_seconds`: how long a delivery taken off the bus stays away before it comes back.
    `take_over`: this process alone works the file's queues, so leases a crashed one left are
    released at once. `shared_topics`: the topics other processes on the file may read.
    """
    from core.backends.sql.bus import SqliteBus
    from core.backends.sql.mailboxes import SqliteMailboxes
    from core.backends.sql.store import SqlReplyRecords, SqlStore

    async with AsyncExitStack() as stack:
        store = await SqlStore.open(store_url)
        stack.push_async_callback(store.close)
        # The reply records in the database; this process alone shows them.
        records = await SqlReplyRecords.open(store_url)
        stack.push_async_callback(records.close)
        # Durable queues and mailboxes in one file: accepted work survives a crash.
        bus = await SqliteBus.open(
            queue_path,
            lease_seconds=lease_seconds,
            take_over=take_over,
            shared_topics=frozenset(shared_topics),
        )
        stack.push_async_callback(bus.close)
        mailboxes = await SqliteMailboxes.open(queue_path)
        stack.push_async_callback(mailboxes.aclose)
        yield Backends(
            store,
            bus,
            mailboxes,
            records,
            distributed=False,
            readiness=store_readiness(store),
        )
