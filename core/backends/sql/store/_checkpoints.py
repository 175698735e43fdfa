"""The `CheckpointStore` of `SqlStore`: one row per turn, keyed by its run key.

Finished rows are pruned a week after they finished, by a `finish_checkpoint` at most every
ten minutes.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import upsert
from core.backends.sql.store._tables import checkpoints
from core.checkpoints import Checkpoint, CheckpointStatus
from core.errors import StoreError
from core.store._shared import check_aware, utc_text

__all__ = ["SqlCheckpoints", "finish", "read", "save"]

log = logging.getLogger(__name__)

_KEEP_FINISHED: Final = timedelta(days=7)
_PRUNE_EVERY: Final = timedelta(minutes=10)

c = checkpoints.c
_READ: Final = select(c.body).where(c.run_key == bindparam("run_key"))
_RUNNING: Final = _READ.where(c.status == "running").with_for_update()
_FINISH: Final = (
    update(checkpoints)
    .where(c.run_key == bindparam("b_run_key"))
    .values(status=bindparam("b_status"), updated_at=bindparam("b_at"), body=bindparam("b_body"))
)


class SqlCheckpoints(SqlBase):
    """The `CheckpointStore` of `SqlStore`."""

    # When finished checkpoints were last pruned by this store (None: not yet).
    _pruned_at: datetime | None = None

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        async with self._begin(f"save checkpoint {checkpoint.run_key!r}") as db:
            await save(db, self._dialect, checkpoint)

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        async with self._read(f"read checkpoint {run_key!r}") as db:
            return await read(db, run_key)

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        query = select(c.body).where(c.status == "running").order_by(c.started_at, c.run_key)
        if older_than is not None:
            query = query.where(c.updated_at < utc_text(older_than))
        async with self._read("list incomplete checkpoints") as db:
            return [Checkpoint.model_validate_json(body) for body in await db.scalars(query)]

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status; False if there is none."""
        now = self._now()
        async with self._begin(f"finish checkpoint {run_key!r}") as db:
            found = await finish(db, run_key, status, now)
        await self._prune_finished(now)
        return found

    async def _prune_finished(self, now: datetime) -> None:
        """Delete checkpoints finished a week ago, at most every ten minutes; best effort."""
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY:
            return
        self._pruned_at = now
        try:
            async with self._begin("prune finished checkpoints") as db:
                await db.execute(
                    delete(checkpoints).where(
                        c.status != "running", c.updated_at < utc_text(now - _KEEP_FINISHED)
                    )
                )
        except StoreError as exc:  # tried again later
            log.warning("%s", exc)
            self._pruned_at = None


async def read(db: AsyncConnection, run_key: str) -> Checkpoint | None:
    """The checkpoint of `run_key`, or None."""
    body = (await db.execute(_READ, {"run_key": run_key})).scalar()
    return None if body is None else Checkpoint.model_validate_json(body)


async def save(db: AsyncConnection, dialect: str, checkpoint: Checkpoint) -> None:
    """Insert or replace the checkpoint (`CheckpointStore.save_checkpoint`), in the
    transaction of `db`."""
    check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
    values = {
        "run_key": checkpoint.run_key,
        "status": checkpoint.status,
        "started_at": utc_text(checkpoint.started_at),
        "updated_at": utc_text(checkpoint.updated_at),
        "body": checkpoint.model_dump_json(),
    }
    await db.execute(upsert(dialect, checkpoints, tuple(values), keys=("run_key",)), values)


async def finish(
    db: AsyncConnection,
    run_key: str,
    status: CheckpointStatus,
    now: datetime,
    *,
    running: bool = False,
) -> bool:
    """Set a checkpoint's status (`CheckpointStore.finish_checkpoint`), in the transaction of
    `db`; False if there is none (with `running`: none that is still running)."""
    query = _RUNNING if running else _READ.with_for_update()
    body = (await db.execute(query, {"run_key": run_key})).scalar()
    if body is None:
        return False
    finished = Checkpoint.model_validate_json(body).model_copy(
        update={"status": status, "updated_at": now}
    )
    values = {
        "b_run_key": run_key,
        "b_status": status,
        "b_at": utc_text(now),
        "b_body": finished.model_dump_json(),
    }
    await db.execute(_FINISH, values)
    return True
