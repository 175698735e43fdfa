"""The `Store` protocol: everything Switchboard keeps, behind one seam.

Implementations: `SqliteStore` (embedded default) and, with the distributed deployment, a
Redis store. Both pass the same contract tests (`tests/contract/test_store_contract.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.checkpoints import Checkpoint, CheckpointStatus
from core.envelopes import Address
from core.facts import MemoryFact
from core.messages import Message, Usage
from core.scheduling.models import Schedule, ScheduleRun

__all__ = [
    "CompactionSummary",
    "CostEntry",
    "CostSummary",
    "Fence",
    "SessionRecord",
    "Store",
]


class SessionRecord(BaseModel):
    """A stored conversation. Several sessions may share a key: `/new` starts another."""

    model_config = ConfigDict(frozen=True)

    id: str
    key: str
    created_at: datetime
    updated_at: datetime
    message_count: int = 0


class Fence(BaseModel):
    """Proof that a worker still holds a session's lease; fenced writes check it atomically.

    A worker whose lease lapsed (it stalled, another worker took over) has its writes refused
    with `StoreError` instead of interleaving with the new holder's.
    """

    model_config = ConfigDict(frozen=True)

    lease_key: str
    token: str


class CostEntry(BaseModel):
    """What one provider call cost, written to the session's ledger."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    run_id: str
    provider: str
    model: str
    usage: Usage
    # None when the model has no known price: the cost is unknown, not zero.
    cost_usd: float | None
    at: datetime


class CostSummary(BaseModel):
    """Ledger totals for one session (or for all when `session_id` is None)."""

    model_config = ConfigDict(frozen=True)

    session_id: str | None = None
    calls: int = 0
    usage: Usage = Usage()
    # The sum of the calls whose cost is known.
    cost_usd: float = 0.0
    # Calls whose cost is unknown (no price for the model); the true total is higher.
    unpriced_calls: int = 0


class CompactionSummary(BaseModel):
    """A summary of a session's messages up to `up_to_seq`, standing in for them in requests.

    `up_to_seq` is the archive marker: later requests send the summary and the messages after
    it. The messages themselves stay in the store.
    """

    model_config = ConfigDict(frozen=True)

    up_to_seq: int = Field(ge=1)
    text: str
    created_at: datetime


class Store(Protocol):
    """Durable state: sessions, their messages and compaction summaries, processed-message ids,
    the cost ledger, schedules and their runs, remembered facts, turn checkpoints.

    Every write is durable when the awaited call returns.
    """

    async def create_session(self, key: str) -> SessionRecord:
        """Start a new session for `key`; it becomes the key's current session."""
        ...

    async def current_session(self, key: str) -> SessionRecord:
        """The newest session for `key`, created if the key has none yet."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or `None`."""
        ...

    async def list_sessions(self, *, limit: int = 50) -> list[SessionRecord]:
        """Sessions, most recently updated first."""
        ...

    async def append_message(
        self, session_id: str, message: Message, *, fence: Fence | None = None
    ) -> Message:
        """Store `message` at the end of the session; returns it with `seq` and `created_at`.

        `seq` starts at 1 and grows by one per message of the session. Raises `StoreError`
        for an unknown session, and (where leases are shared between processes) when `fence`
        shows the writer no longer holds the session's lease.
        """
        ...

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Messages with `seq > after_seq`, oldest first, at most `limit` of them."""
        ...

    async def save_summary(self, session_id: str, summary: CompactionSummary) -> None:
        """Store a compaction summary of the session; one with the same `up_to_seq` replaces
        the stored one. Raises `StoreError` for an unknown session or a naive time."""
        ...

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        """The session's summary with the highest `up_to_seq`, or None."""
        ...

    async def mark_processed(self, key: str) -> bool:
        """Remember that the inbound message `key` was answered; False if it already was."""
        ...

    async def is_processed(self, key: str) -> bool:
        """Whether `mark_processed(key)` happened before."""
        ...

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger."""
        ...

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None."""
        ...

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first."""
        ...

    async def save_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the stored one with the same id."""
        ...

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        ...

    async def list_schedules(
        self, *, owner: str | None = None, deliver_to: Address | None = None
    ) -> list[Schedule]:
        """Schedules (of `owner`, delivered to `deliver_to`'s platform, chat and thread when
        given), oldest first."""
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its runs; False if there was none."""
        ...

    async def due_schedules(self, now: datetime, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose `next_run_at` is not after `now`, the longest due first."""
        ...

    async def save_run(self, run: ScheduleRun) -> None:
        """Insert a run, or replace the stored one with the same id."""
        ...

    async def list_runs(self, schedule_id: str, *, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs, newest (by `started_at`) first."""
        ...

    async def prune_runs(self, schedule_id: str, *, keep: int) -> int:
        """Delete all but the newest `keep` runs of a schedule; returns how many went."""
        ...

    async def remember_fact(self, fact: MemoryFact) -> None:
        """Store a fact in its scope.

        Storing the same fact again changes nothing (a retried write is harmless); a different
        fact with an id its scope already holds raises `StoreError`, as does a naive time.
        """
        ...

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        """The facts of `scope` that share terms with `query` (see `core.facts.MemoryQuery`),
        best matches first; a query without search terms lists the newest facts."""
        ...

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        """The facts of `scope`, newest (by `created_at`, then id) first."""
        ...

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete the fact `fact_id` of `scope`; False if the scope holds no such fact."""
        ...

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

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
