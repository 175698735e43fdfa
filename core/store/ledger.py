"""The cost ledger: what each provider call cost, and totals per session, per person, per
chat, per day and per model; and the spend of one UTC day, which the budgets read."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from core.messages import Usage

__all__ = ["CostEntry", "CostGroup", "CostGrouping", "CostLedger", "CostSummary", "Spending"]

# What `costs_by` groups the ledger by.
CostGrouping = Literal["user", "chat", "day", "model"]


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
    # Who the call answered, `<platform>:<user id>` (a schedule's owner for its runs), and in
    # which chat, `<platform>:<bot>:<chat>`: spending counts toward both across `/new`.
    # None for calls no person asked for (and for entries older than these fields).
    user: str | None = None
    chat: str | None = None
    # The entry's own id, given by its writer: a write tried again records it once. None for
    # entries without one (older, or written by callers that never try again).
    id: str | None = None
    # The call ran on `[budgets] degrade_model` because a daily budget was nearly spent.
    degraded: bool = False


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
    # Turns that ran (some of their calls) on the cheaper model (`[budgets] degrade_model`).
    degraded_turns: int = 0


class CostGroup(BaseModel):
    """Ledger totals of one person, chat, UTC day (`YYYY-MM-DD`) or model.

    `key` is "" for the calls that carry no person (or no chat).
    """

    model_config = ConfigDict(frozen=True)

    by: CostGrouping
    key: str
    calls: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    degraded_turns: int = 0


class Spending(BaseModel):
    """What the budgets read before a model call, in USD: one session's total, and the
    spending of one UTC day by one person, one chat and everyone (`CostLedger.spending`)."""

    model_config = ConfigDict(frozen=True)

    session: float = 0.0
    user_daily: float = 0.0
    chat_daily: float = 0.0
    global_daily: float = 0.0


class CostLedger(Protocol):
    """One entry per provider call, summed per session and overall."""

    async def record_cost(self, entry: CostEntry) -> None:
        """Append one provider call to the cost ledger. An entry with an `id` the ledger holds
        already is not recorded again (a caller trying again after an outage, the first try's
        answer lost though it was recorded)."""
        ...

    async def cost_summary(self, session_id: str | None = None) -> CostSummary:
        """Totals for one session, or for every session when `session_id` is None."""
        ...

    async def costs_by_session(self, *, limit: int = 50) -> list[CostSummary]:
        """Per-session totals, most recently charged session first."""
        ...

    async def daily_spend(
        self, day: date, *, user: str | None = None, chat: str | None = None
    ) -> float:
        """The known cost in USD of the calls made on UTC `day`: one person's (`user`), one
        chat's (`chat`), or everyone's (neither). `ValueError` if both are given."""
        ...

    async def spending(
        self, day: date, *, session_id: str, user: str | None = None, chat: str | None = None
    ) -> Spending:
        """In one read: `cost_summary(session_id).cost_usd` and the `daily_spend` of `day` for
        `user`, for `chat` and for everyone (0 for a person or chat not given)."""
        ...

    async def costs_by(self, by: CostGrouping, *, limit: int = 50) -> list[CostGroup]:
        """Totals per person, chat, day or model: days newest first, the others costliest
        first (then by key)."""

    async def cost_entries(self, session_id: str) -> list[CostEntry]:
        """A session's ledger entries in the order they were recorded (none for an unknown
        session): the breakdowns per day and per model are summed from them."""
        ...
