"""`SqlReplyRecords`: reply records in the SQL database, beside the store's tables.

The records outlive a restart (a redelivered final reply is recognised); rows older than a
day are pruned on open and every `_PRUNE_EVERY` saves. The hold on a reply is an asyncio lock
in this process (`LocalHolds`), as in the embedded deployment: holding a reply across
processes is coordination, which stays with Redis.
"""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from typing import Final

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from core.errors import ChannelError, StoreError
from core.store.replies import RECORD_TTL_SECONDS, LocalHolds, ReplyRecord
from core.store.sql._dialect import upsert
from core.store.sql._engine import open_engine
from core.store.sql._schema import upgrade
from core.store.sql._tables import reply_records

__all__ = ["SqlReplyRecords"]

_PRUNE_EVERY: Final = 1000

r = reply_records.c


class SqlReplyRecords:
    """Reply records in a SQL database (`await SqlReplyRecords.open(url)`, then `close`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        """Wrap an engine whose schema is at head; use `open` instead."""
        self._engine = engine
        self._holds = LocalHolds()
        self._saves = 0

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
        try:
            async with self._engine.connect() as db:
                body = (await db.execute(select(r.body).where(r.key == key))).scalar()
        except (SQLAlchemyError, StoreError) as exc:
            raise ChannelError(f"cannot read the record of reply {key}: {exc}") from exc
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
        try:
            async with self._engine.begin() as db:
                await db.execute(upsert(name, reply_records, values, keys=("key",)))
            self._saves += 1
            if self._saves % _PRUNE_EVERY == 0:
                await self._prune()
        except (SQLAlchemyError, StoreError) as exc:
            raise ChannelError(f"cannot save the record of reply {record.key}: {exc}") from exc

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        """Hold reply `key` (in this process: an asyncio lock)."""
        return self._holds.hold(key)

    async def _prune(self) -> None:
        """Forget records older than a day."""
        cutoff = time.time() - RECORD_TTL_SECONDS
        async with self._engine.begin() as db:
            await db.execute(delete(reply_records).where(r.updated_at < cutoff))
