"""`switchboard cost --by user|chat|day|model`: the ledger's totals per person, chat, UTC day
or model (the per-session view stays in `bots/commands/chat.py`)."""

from __future__ import annotations

from typing import Final

from rich.table import Table

from bots.app import open_store
from bots.commands.common import stdout
from bots.settings import Settings
from core.pricing import format_usd
from core.store.ledger import CostGrouping

__all__ = ["GROUPINGS", "cost_by", "money"]

GROUPINGS: Final[tuple[CostGrouping, ...]] = ("user", "chat", "day", "model")

# What a row's key is, per grouping, for the table's first column.
_HEADINGS: Final[dict[str, str]] = {
    "user": "person",
    "chat": "chat",
    "day": "day (UTC)",
    "model": "model",
}


async def cost_by(settings: Settings, by: CostGrouping, limit: int) -> None:
    """Print the ledger's totals grouped `by`, then the overall total."""
    async with open_store(settings) as store:
        rows = await store.costs_by(by, limit=limit)
        total = await store.cost_summary()
    console = stdout()
    if total.calls == 0:
        console.print("Nothing spent yet: no model calls are recorded.", markup=False)
        return
    table = Table(_HEADINGS[by], "calls", "tokens in", "out", "USD", box=None, pad_edge=False)
    for row in rows:
        table.add_row(
            row.key or "(none)",
            str(row.calls),
            f"{row.usage.input_tokens:,}",
            f"{row.usage.output_tokens:,}",
            money(row.cost_usd, row.unpriced_calls),
        )
    table.add_row(
        "total",
        str(total.calls),
        f"{total.usage.input_tokens:,}",
        f"{total.usage.output_tokens:,}",
        money(total.cost_usd, total.unpriced_calls),
    )
    console.print(table)
    if by in ("user", "chat"):
        console.print(
            f"(none): calls no {'person' if by == 'user' else 'chat'} is known for "
            "(recorded before the ledger kept it).",
            style="dim",
            markup=False,
        )


def money(amount: float, unpriced: int) -> str:
    """A cost for a table: `+ unknown` where some calls had no known price."""
    text = format_usd(amount)
    return f"{text} + unknown" if unpriced else text
