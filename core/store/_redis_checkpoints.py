"""The `CheckpointStore` of `RedisStore`: turn checkpoints.

Per turn (keys in `core/redis_keys.py`): a hash holding the checkpoint's JSON under `body`;
and one sorted set of the run keys of `running` checkpoints, scored by `updated_at` (epoch
microseconds), which recovery reads. A save is one transaction and safe to replay. Finished
checkpoints expire a week after they finished.

A checkpoint has one writer at a time (the worker holding its session's lease, or `recover`),
so finishing one reads and rewrites it without a script.

Each method checks its arguments and turns client errors into `StoreError`s.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from core.checkpoints import Checkpoint, CheckpointStatus
from core.errors import StoreError
from core.store._redis_base import RedisBase
from core.store._shared import check_aware, epoch_micros

__all__ = ["RedisCheckpoints"]

_KEEP_FINISHED: Final = timedelta(days=7)


class RedisCheckpoints(RedisBase):
    """The `CheckpointStore` of `RedisStore`."""

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
        async with self._translated(f"save checkpoint {checkpoint.run_key!r}"):
            key = self._keys.checkpoint(checkpoint.run_key)
            running = self._keys.running_checkpoints()
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(key, "body", checkpoint.model_dump_json())
                if checkpoint.status == "running":
                    pipe.persist(key)
                    pipe.zadd(running, {checkpoint.run_key: epoch_micros(checkpoint.updated_at)})
                else:
                    pipe.expire(key, _KEEP_FINISHED)
                    pipe.zrem(running, checkpoint.run_key)
                await pipe.execute()

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        async with self._translated(f"read checkpoint {run_key!r}"):
            raw = await self._client.hget(self._keys.checkpoint(run_key), "body")
            if raw is None:
                return None
            return Checkpoint.model_validate_json(raw)

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        async with self._translated("list incomplete checkpoints"):
            top: float | str = "+inf" if older_than is None else f"({epoch_micros(older_than)}"
            members = await self._client.zrangebyscore(
                self._keys.running_checkpoints(), "-inf", top
            )
            found: list[Checkpoint] = []
            for member in members:
                run_key = member.decode() if isinstance(member, bytes) else str(member)
                checkpoint = await self.get_checkpoint(run_key)
                if checkpoint is not None and checkpoint.status == "running":
                    found.append(checkpoint)
            found.sort(key=lambda c: (c.started_at, c.run_key))
            return found

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status; False if there is none."""
        async with self._translated(f"finish checkpoint {run_key!r}"):
            now = self._now()
            found = await self.get_checkpoint(run_key)
            if found is None:
                return False
            await self.save_checkpoint(
                found.model_copy(update={"status": status, "updated_at": now})
            )
            return True
