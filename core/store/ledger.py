"""The cost ledger: what each provider call cost, and totals per session."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from core.messages import Usage

__all__ = ["CostEntry", "CostLedger", "CostSummary"]


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


class CostLedger(Protocol):
    """One entry per provider call, summed per session and overall."""

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger."""
        ...

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None."""
        ...

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first."""
        ...

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded (none for an unknown
        session): the breakdowns per day and per model are summed from them."""
        ...
