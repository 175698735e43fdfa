"""`SqlReplyRecords`: reply records in the SQL database, beside the store's tables.

The records outlive a restart (a redelivered final reply is recognised); rows older than a
day are pruned on open and every `_PRUNE_EVERY` saves. The hold on a reply is an asyncio lock
in this process (`LocalHolds`), as in the embedded deployment: holding a reply across
processes is coordination, in Redis (`core/backends/redis/replies_hold.py`; `HeldReplyRecords`
puts these records under those holds).

While the database is away (a PostgreSQL restart), a read or a save waits for it, as a turn
does (`core/outages.py`), rather than failing the delivery at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Final, TypeVar

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from core.backends.sql.store._dialect import upsert
from core.backends.sql.store._engine import is_outage, open_engine
from core.backends.sql.store._schema import upgrade
from core.backends.sql.store._tables import reply_records
from core.errors import ChannelError, StoreError, StoreUnavailable
from core.outages import Patience
from core.store.replies import RECORD_TTL_SECONDS, LocalHolds, ReplyRecord

__all__ = ["SqlReplyRecords"]

_T = TypeVar("_T")

_PRUNE_EVERY: Final = 1000

r = reply_records.c


class SqlReplyRecords:
    """Reply records in a SQL database (`await SqlReplyRecords.open(url)`, then `close`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        """Wrap an engine whose schema is at head; use `open` instead."""
        self._engine = engine
        self._holds = LocalHolds()
        self._saves = 0
        self._patience = Patience("reply records")

    @classmethod
    async def open(cls, url: str | URL) -> SqlReplyRecords:
        """Open the database (the store's is fine), its schema upgraded to the newest."""
        try:
            engine = await open_engine(url)
        except StoreError as exc:
            raise ChannelError(f"cannot open reply records: {exc}") from exc
        try:
            await upgrade(engine)
            opened = cls(engine)
            await opened._prune()
        except (SQLAlchemyError, OSError) as exc:
            await engine.dispose()
            raise ChannelError(f"cannot open reply records: {exc}") from exc
        except BaseException:
            await engine.dispose()
            raise
        return opened

    async def close(self) -> None:
        """Close every connection."""
        await self._engine.dispose()

    async def get(self, key: str) -> ReplyRecord | None:
        """The record of reply `key`, if any."""

        async def read() -> str | None:
            async with self._engine.connect() as db:
                body: str | None = (await db.execute(select(r.body).where(r.key == key))).scalar()
                return body

        body = await self._waiting(f"read the record of reply {key}", read, read=True)
        if body is None:
            return None
        try:
            return ReplyRecord.model_validate_json(body)
        except ValidationError:
            return None

    async def save(self, record: ReplyRecord) -> None:
        """Store `record`."""
        values = {"key": record.key, "body": record.model_dump_json(), "updated_at": time.time()}
        name = self._engine.dialect.name

        async def write() -> None:
            async with self._engine.begin() as db:
                await db.execute(upsert(name, reply_records, tuple(values), keys=("key",)), values)

        await self._waiting(f"save the record of reply {record.key}", write, read=False)
        self._saves += 1
        if self._saves % _PRUNE_EVERY == 0:
            await self._waiting("forget old reply records", self._prune, read=False)

    async def _waiting(
        self, action: str, operation: Callable[[], Awaitable[_T]], *, read: bool
    ) -> _T:
        """`operation()`, waited out while the database is away; `ChannelError` when it
        fails otherwise, or stays away past the outage budget."""

        async def attempt() -> _T:
            try:
                return await operation()
            except DBAPIError as exc:
                if is_outage(exc):
                    raise StoreUnavailable(f"cannot {action}: {exc.orig}") from exc
                raise ChannelError(f"cannot {action}: {exc.orig}") from exc
            except OSError as exc:  # the server is not there (a refused connection)
                raise StoreUnavailable(f"cannot {action}: {exc}") from exc
            except SQLAlchemyError as exc:
                raise ChannelError(f"cannot {action}: {exc}") from exc

        try:
            return await self._patience(attempt, read=read)
        except StoreUnavailable as exc:
            raise ChannelError(str(exc)) from exc

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` (in this process: an asyncio lock)."""
        return self._holds.hold(key)

    async def _prune(self) -> None:
        """Forget records older than a day."""
        cutoff = time.time() - RECORD_TTL_SECONDS
        async with self._engine.begin() as db:
            await db.execute(delete(reply_records).where(r.updated_at < cutoff))
