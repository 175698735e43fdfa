"""What every concern of `SqlStore` shares: the engine, transactions, the clock.

Each public method is one transaction (`_begin` for writes, `_read` for reads): committed
when it returns, rolled back when it raises, so a call that raised wrote nothing and may
simply be made again. Driver failures become `StoreError`s that say what the store was doing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from core.errors import StoreError, StoreUnavailable
from core.store.sql._engine import READS, is_outage

__all__ = ["SqlBase"]


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
        try:
            async with self._engine.connect() as connection:
                if reads:
                    await connection.execution_options(**{READS: True})
                async with connection.begin():
                    yield connection
        except DBAPIError as exc:
            if is_outage(exc):
                raise StoreUnavailable(f"SQL store could not {action}: {exc.orig}") from exc
            raise StoreError(f"SQL store could not {action}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"SQL store could not {action}: {exc}") from exc
        except OSError as exc:  # the server is not there (a refused or dropped connection)
            raise StoreUnavailable(f"SQL store could not {action}: {exc}") from exc
        except ValidationError as exc:
            raise StoreError(
                f"SQL store could not {action}: stored data is invalid: {exc}"
            ) from exc

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store's clock returned a naive datetime; it must be aware")
        return now.astimezone(UTC)
