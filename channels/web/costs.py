"""What the page's cost view shows: sums of the cost ledger per conversation, day and model,
and the spend each budget is measured against.

One pass over the ledger entries of the most recently charged sessions: the per-day and
per-model sums and the spends of the budgets all come from the same entries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from core.clock import utc_now
from core.store.base import Store
from core.store.ledger import CostEntry, CostSummary

__all__ = ["CostReport", "cost_report"]

# How many sessions the breakdowns read (most recently charged first).
SESSIONS = 200


@dataclass
class CostReport:
    """The ledger summed for the page."""

    total: CostSummary
    conversations: list[dict[str, Any]] = field(default_factory=list)
    # day or model -> [USD, tokens]
    days: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    models: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    # Today's (UTC) spend, overall, per chat and per person.
    today_total: float = 0.0
    today_chats: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    today_users: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    top_session: float = 0.0

    def add(self, entry: CostEntry, chat: str, today: date) -> None:
        """Count one ledger entry (`chat`: its session's key when the entry names none)."""
        cost = entry.cost_usd or 0.0
        for bucket in (self.days[entry.at.date().isoformat()], self.models[entry.model]):
            bucket[0] += cost
            bucket[1] += entry.usage.total_tokens
        if entry.at.date() != today:
            return
        self.today_total += cost
        self.today_chats[getattr(entry, "chat", None) or chat] += cost
        user = getattr(entry, "user", None)
        if user:
            self.today_users[user] += cost

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
            "days": [
                {"day": day, "cost_usd": v[0], "tokens": int(v[1])}
                for day, v in sorted(self.days.items())
            ],
            "models": [
                {"model": model, "cost_usd": v[0], "tokens": int(v[1])}
                for model, v in sorted(self.models.items(), key=lambda kv: (-kv[1][0], kv[0]))
            ],
            "budgets": self.budgets(limits),
        }


async def cost_report(store: Store) -> CostReport:
    """The ledger of the `SESSIONS` most recently charged sessions, summed."""
    today = utc_now().date()
    report = CostReport(total=await store.cost_summary())
    for row in await store.costs_by_session(limit=SESSIONS):
        assert row.session_id is not None
        record = await store.get_session(row.session_id)
        key = record.key if record else ""
        report.conversations.append(_row(row) | {"session": row.session_id, "key": key})
        report.top_session = max(report.top_session, row.cost_usd)
        for entry in await store.cost_entries(row.session_id):
            report.add(entry, key, today)
    return report


def _row(summary: CostSummary) -> dict[str, Any]:
    return {
        "calls": summary.calls,
        "tokens": summary.usage.total_tokens,
        "cost_usd": summary.cost_usd,
        "unpriced_calls": summary.unpriced_calls,
    }
