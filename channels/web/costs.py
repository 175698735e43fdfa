"""What the page's cost view shows: sums of the cost ledger per conversation, day and model,
and the spend each budget is measured against.

The sums per day and per model are the ledger's own groupings (`CostLedger.costs_by`, over
every call); today's spend per chat and per person, which the budgets are measured against,
comes from the entries of the most recently charged sessions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from core.clock import utc_now
from core.store.base import Store
from core.store.ledger import CostEntry, CostGroup, CostSummary

__all__ = ["CostReport", "cost_report"]

# How many sessions the page lists and reads today's entries of (most recently charged first).
SESSIONS = 200
# How many days the chart shows, newest last.
DAYS = 90


@dataclass
class CostReport:
    """The ledger summed for the page."""

    total: CostSummary
    conversations: list[dict[str, Any]] = field(default_factory=list)
    # The ledger's totals per UTC day and per model.
    days: Sequence[CostGroup] = ()
    models: Sequence[CostGroup] = ()
    # Today's (UTC) spend: everyone's (from the ledger), per chat and per person (from the
    # listed conversations' entries).
    today_total: float = 0.0
    today_chats: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    today_users: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    top_session: float = 0.0

    def add(self, entry: CostEntry, chat: str, today: date) -> None:
        """Count one ledger entry toward today's spends (`chat`: its session's key when the
        entry names none)."""
        if entry.at.date() != today:
            return
        cost = entry.cost_usd or 0.0
        self.today_chats[entry.chat or chat] += cost
        if entry.user:
            self.today_users[entry.user] += cost

    def spent(self, budget: str) -> float | None:
        """What a budget is measured against: its busiest scope's spend (None: not known here).

        `per_session` against the conversation that spent most, the daily ones against today's
        spend (overall, the busiest chat, the busiest person); anything else against the total.
        """
        match budget:
            case "per_session":
                return self.top_session
            case "global_daily":
                return self.today_total
            case "per_chat_daily":
                return max(self.today_chats.values(), default=0.0)
            case "per_user_daily":
                return max(self.today_users.values(), default=0.0) if self.today_users else None
            case "per_schedule_run":
                return None
            case _:
                return self.total.cost_usd

    def budgets(self, limits: Mapping[str, float]) -> list[dict[str, Any]]:
        """Each limit with its spend and what is left of it."""
        shown = []
        for name, limit in limits.items():
            spent = self.spent(name)
            left = None if spent is None else limit - spent
            shown.append({"name": name, "limit_usd": limit, "spent_usd": spent, "left_usd": left})
        return shown

    def as_json(self, limits: Mapping[str, float]) -> dict[str, Any]:
        """The `GET /api/costs` answer."""
        return {
            "total": _row(self.total),
            "conversations": self.conversations,
            "days": [{"day": g.key} | _group(g) for g in sorted(self.days, key=lambda g: g.key)],
            "models": [{"model": g.key} | _group(g) for g in self.models],
            "budgets": self.budgets(limits),
        }


async def cost_report(store: Store) -> CostReport:
    """The ledger summed for the page: totals per day and model over every call, the
    `SESSIONS` most recently charged conversations, and today's spends."""
    today = utc_now().date()
    report = CostReport(
        total=await store.cost_summary(),
        days=await store.costs_by("day", limit=DAYS),
        models=await store.costs_by("model"),
        today_total=await store.daily_spend(today),
    )
    for row in await store.costs_by_session(limit=SESSIONS):
        assert row.session_id is not None
        record = await store.get_session(row.session_id)
        key = record.key if record else ""
        report.conversations.append(_row(row) | {"session": row.session_id, "key": key})
        report.top_session = max(report.top_session, row.cost_usd)
        for entry in await store.cost_entries(row.session_id):
            report.add(entry, key, today)
    return report


def _group(group: CostGroup) -> dict[str, Any]:
    # `unpriced_calls`: calls without a known price; `cost_usd` sums only the others.
    return {
        "calls": group.calls,
        "tokens": group.usage.total_tokens,
        "cost_usd": group.cost_usd,
        "unpriced_calls": group.unpriced_calls,
    }


def _row(summary: CostSummary) -> dict[str, Any]:
    return {
        "calls": summary.calls,
        "tokens": summary.usage.total_tokens,
        "cost_usd": summary.cost_usd,
        "unpriced_calls": summary.unpriced_calls,
    }
