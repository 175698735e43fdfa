"""Turn checkpoints, for recovery after a crash (see `core/checkpoints.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from core.checkpoints import Checkpoint, CheckpointStatus

__all__ = ["CheckpointStore"]


class CheckpointStore(Protocol):
    """Where each turn notes how far it got."""

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert the checkpoint, or replace the stored one with the same run key; raises
        `StoreError` for a naive time."""
        ...

    async def get_checkpoint(self, run_key: str) -> Checkpoint | None:
        """The checkpoint of `run_key`, or None."""
        ...

    async def incomplete_checkpoints(
        self, *, older_than: datetime | None = None
    ) -> list[Checkpoint]:
        """`running` checkpoints last updated before `older_than` (all of them when None),
        oldest started first."""
        ...

    async def finish_checkpoint(self, run_key: str, status: CheckpointStatus) -> bool:
        """Set a checkpoint's status (and `updated_at` to the store's now); False if there is
        none. A finished checkpoint is no longer incomplete."""
        ...
