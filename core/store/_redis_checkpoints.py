"""The `CheckpointStore` of `RedisStore`: turn checkpoints.

Per turn (keys in `core/redis_keys.py`): a hash holding the checkpoint's JSON under `body`,
with its `status` and `updated_at` also in fields of their own, which win over the body's (so
finishing a checkpoint is one script that rewrites only them, without reading the body);
and one sorted set of the run keys of `running` checkpoints, scored by `updated_at` (epoch
microseconds), which recovery reads. A save is one script (atomic, and one command of the
process's batch rather than a MULTI/EXEC block) and safe to replay. Finished checkpoints
expire a week after they finished.


Each method checks its arguments and turns client errors into `StoreError`s.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from core.checkpoints import Checkpoint, CheckpointStatus
from core.errors import StoreError
from core.store._redis_base import RedisBase, text
from core.store._shared import check_aware, epoch_micros

__all__ = ["RedisCheckpoints"]

_KEEP_FINISHED: Final = timedelta(days=7)

# KEYS: checkpoint, running set; ARGV: run key, status, updated_at (ISO text), keep seconds.
# 1 when the checkpoint exists (now finished), 0 when there is none.
_FINISH: Final = """
if redis.call('HEXISTS', KEYS[1], 'body') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""

# KEYS: checkpoint, running set; ARGV: body (JSON), status, updated_at (ISO text), run key,
# updated_at (epoch microseconds), keep seconds. A running checkpoint is kept and listed as
# running; any other expires and leaves the running set.
_SAVE: Final = """
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'status', ARGV[2], 'updated_at', ARGV[3])
if ARGV[2] == 'running' then
  redis.call('PERSIST', KEYS[1])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
else
  redis.call('EXPIRE', KEYS[1], ARGV[6])
  redis.call('ZREM', KEYS[2], ARGV[4])
end
return 1
"""


class RedisCheckpoints(RedisBase):
    """The `CheckpointStore` of `RedisStore`."""

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key."""
        check_aware(checkpoint, f"checkpoint {checkpoint.run_key!r}")
        with self._translated(f"save checkpoint {checkpoint.run_key!r}"):
            await self._script(_SAVE)(
                keys=[self._keys.checkpoint(checkpoint.run_key), self._keys.running_checkpoints()],
                args=[
                    checkpoint.model_dump_json(),
                    checkpoint.status,
                    checkpoint.updated_at.isoformat(),
                    checkpoint.run_key,
                    epoch_micros(checkpoint.updated_at),
                    int(_KEEP_FINISHED.total_seconds()),
                ],
            )

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        with self._translated(f"read checkpoint {run_key!r}"):
            raw, status, updated_at = await self._client.hmget(
                self._keys.checkpoint(run_key), ["body", "status", "updated_at"]
            )
            if raw is None:
                return None
            found = Checkpoint.model_validate_json(raw)
            if status is None or updated_at is None:
                return found  # written before these fields existed
            return found.model_copy(
                update={
                    "status": text(status),
                    "updated_at": datetime.fromisoformat(text(updated_at)),
                }
            )

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all when None), oldest
        started first."""
        if older_than is not None and older_than.tzinfo is None:
            raise StoreError("incomplete_checkpoints needs an aware datetime")
        with self._translated("list incomplete checkpoints"):
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
        with self._translated(f"finish checkpoint {run_key!r}"):
            finished = await self._script(_FINISH)(
                keys=[self._keys.checkpoint(run_key), self._keys.running_checkpoints()],
                args=[
                    run_key,
                    status,
                    self._now().isoformat(),
                    int(_KEEP_FINISHED.total_seconds()),
                ],
            )
            return bool(finished)
