"""What every concern of `SqlStore` shares: the engine, transactions, the clock.

Each public method is one transaction (`_begin` for writes, `_read` for reads): committed
when it returns, rolled back when it raises, so a call that raised wrote nothing and may
simply be made again. Driver failures become `StoreError`s that say what the store was doing;
those of a database away for now (a restart) and a full SQLite disk `StoreUnavailable`,
outages a turn waits out.

One failure leaves the outcome open: the connection breaks after COMMIT was sent, before its
answer came (PostgreSQL restarted, a network cut). The server may have committed; a caller
trying the call again would then write it twice (a message appended twice, a cost counted
twice). So on PostgreSQL a write transaction learns its transaction id before it commits, and
when the commit's answer is lost it asks the server (once back, on a new connection) whether
that transaction committed: if so the call returns as if the answer had come; if not it is an
outage like any other; if the server does not come back in time to say, the call raises a
`StoreError` that is not an outage, so nobody tries it again blindly.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Final

from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from core.backends.sql.store._engine import READS, is_outage
from core.errors import StoreError, StoreUnavailable
from core.outages import OUTAGE_BUDGET
from core.sqlite_file import disk_full

__all__ = ["SqlBase"]

# A transaction's id (assigned now if it has none), and later whether it committed: both
# there since PostgreSQL 10 (`pg_current_xact_id` and `pg_xact_status` only since 13).
_XID: Final = text("SELECT txid_current()")
_XID_STATUS: Final = text("SELECT txid_status(:xid)")
_FIRST_WAIT = 0.1
_LONGEST_WAIT = 3.0


class SqlBase:
    """The engine and the transaction helper the per-concern classes are built on."""

    def __init__(self, engine: AsyncEngine, *, clock: Callable[[], datetime]) -> None:
        """Wrap an engine whose schema is at head; use `SqlStore.open` instead."""
        self._engine = engine
        self._dialect = engine.dialect.name
        self._clock = clock
        self._closed = False

    async def close(self) -> None:
        """Close every connection; later calls raise `StoreError`."""
        if self._closed:
            return
        self._closed = True
        await self._engine.dispose()

    def _begin(self, action: str) -> AbstractAsyncContextManager[AsyncConnection]:
        """One write transaction: committed on success, rolled back on any exception."""
        return self._transaction(action, reads=False)

    def _read(self, action: str) -> AbstractAsyncContextManager[AsyncConnection]:
        """One transaction that only reads (on SQLite it leaves the write lock to writers)."""
        return self._transaction(action, reads=True)

    @asynccontextmanager
    async def _transaction(self, action: str, *, reads: bool) -> AsyncIterator[AsyncConnection]:
        if self._closed:
            raise StoreError("the SQL store is closed")
        # Set once the work is done and only the commit is left (PostgreSQL writes).
        xid: int | None = None
        try:
            async with self._engine.connect() as connection:
                if reads:
                    await connection.execution_options(**{READS: True})
                async with connection.begin():
                    yield connection
                    if not reads and self._dialect == "postgresql":
                        xid = int((await connection.execute(_XID)).scalar_one())
        except DBAPIError as exc:
            if is_outage(exc):
                if xid is not None and await self._committed(xid, action, exc):
                    return  # committed: only its answer was lost
                raise StoreUnavailable(f"SQL store could not {action}: {exc.orig}") from exc
            if isinstance(exc.orig, sqlite3.Error) and disk_full(exc.orig):
                # An outage to wait out, not a fault of the write (reads still work).
                raise StoreUnavailable(
                    f"SQL store could not {action}: the disk is full ({exc.orig})"
                ) from exc
            raise StoreError(f"SQL store could not {action}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"SQL store could not {action}: {exc}") from exc
        except OSError as exc:  # the server is not there (a refused or dropped connection)
            raise StoreUnavailable(f"SQL store could not {action}: {exc}") from exc
        except ValidationError as exc:
            raise StoreError(
                f"SQL store could not {action}: stored data is invalid: {exc}"
            ) from exc

    async def _committed(self, xid: int, action: str, cause: DBAPIError) -> bool:
        """Whether transaction `xid`, whose commit's answer was lost, committed: asked on a
        new connection, waiting for the server for up to `OUTAGE_BUDGET` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OUTAGE_BUDGET
        wait = _FIRST_WAIT
        while True:
            status: str | None = "in progress"
            try:
                async with self._engine.connect() as connection:
                    found = await connection.execute(_XID_STATUS, {"xid": xid})
                    status = found.scalar_one_or_none()
            except DBAPIError as exc:
                if not is_outage(exc):
                    raise
            except OSError:
                pass  # still away
            if status != "in progress":
                return status == "committed"
            if loop.time() + wait > deadline:
                raise StoreError(
                    f"SQL store could not {action}: the connection broke as it committed "
                    f"({cause.orig}), and the database did not come back in time to say "
                    "whether it did"
                ) from cause
            await asyncio.sleep(wait)
            wait = min(2 * wait, _LONGEST_WAIT)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)
