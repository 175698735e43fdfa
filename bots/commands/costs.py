"""The tables and documents of `switchboard cost`: per session, and `--by user|chat|day|model`
(the ledger's totals per person, chat, UTC day or model). The command is in
`bots/commands/chat.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from rich.table import Table

from bots.app import open_store
from bots.commands.common import echo_json, listing, stdout, whole, wrapped
from bots.settings import Settings
from core.pricing import format_usd
from core.store.ledger import CostGroup, CostGrouping, CostSummary
from core.store.log import SessionRecord

__all__ = ["GROUPINGS", "cost_by", "cost_document", "degraded_line", "money", "session_costs"]

GROUPINGS: Final[tuple[CostGrouping, ...]] = ("user", "chat", "day", "model")

# What a row's key is, per grouping, for the table's first column.
_HEADINGS: Final[dict[str, str]] = {
    "user": "person",
    "chat": "chat",
    "day": "day (UTC)",
    "model": "model",
}

# Below this width the per-session table leaves out the cache columns, so that the session
# ids and the totals fit whole in an 80-column terminal.
_WIDE: Final = 100


async def cost_by(
    settings: Settings, by: CostGrouping, limit: int, *, as_json: bool = False
) -> None:
    """Print the ledger's totals grouped `by`, then the overall total (as JSON with
    `as_json`)."""
    async with open_store(settings) as store:
        rows = await store.costs_by(by, limit=limit)
        total = await store.cost_summary()
    if as_json:
        echo_json(
            {
                "by": by,
                "rows": [row.model_dump(mode="json", exclude={"by"}) for row in rows],
                "total": total.model_dump(mode="json", exclude={"session_id"}),
            }
        )
        return
    console = stdout()
    if total.calls == 0:
        console.print("Nothing spent yet: no model calls are recorded.", markup=False)
        return
    console.print(_grouped(by, rows, total))
    if total.degraded_turns:
        console.print(degraded_line(total.degraded_turns), markup=False)
    if by in ("user", "chat"):
        console.print(
            f"(none): calls no {'person' if by == 'user' else 'chat'} is known for "
            "(recorded before the ledger kept it).",
            style="dim",
            markup=False,
        )


def _grouped(by: str, rows: Sequence[CostGroup], total: CostSummary) -> Table:
    # Person and chat keys are ids too: whole, like the numbers.
    table = listing(
        whole(_HEADINGS[by]),
        whole("calls"),
        whole("tokens in"),
        whole("out"),
        whole("USD"),
    )
    lines: list[tuple[str, CostGroup | CostSummary]] = [(r.key or "(none)", r) for r in rows]
    for key, row in [*lines, ("total", total)]:
        table.add_row(
            key,
            str(row.calls),
            f"{row.usage.input_tokens:,}",
            f"{row.usage.output_tokens:,}",
            money(row.cost_usd, row.unpriced_calls),
        )
    return table


def session_costs(
    rows: Sequence[CostSummary],
    total: CostSummary,
    keys: Mapping[str | None, SessionRecord | None],
    *,
    width: int,
) -> Table:
    """The per-session table, then the total; the cache columns only where there is room."""
    wide = width >= _WIDE
    columns = [whole("session"), wrapped("key"), whole("calls"), whole("tokens in")]
    columns.append(whole("out"))
    if wide:
        columns += [whole("cache read"), whole("cache write")]
    table = listing(*columns, whole("USD"))
    for row in [*rows, total]:
        record = keys.get(row.session_id) if row is not total else None
        usage = row.usage
        cache = [f"{usage.cache_read_tokens:,}", f"{usage.cache_write_tokens:,}"] if wide else []
        table.add_row(
            row.session_id if row is not total else "total",
            record.key if record else "",
            str(row.calls),
            f"{usage.input_tokens:,}",
            f"{usage.output_tokens:,}",
            *cache,
            money(row.cost_usd, row.unpriced_calls),
        )
    return table


def cost_document(
    rows: Sequence[CostSummary],
    total: CostSummary,
    keys: Mapping[str | None, SessionRecord | None],
) -> dict[str, Any]:
    """`cost --json`: each session's totals with its key, and the overall total."""
    sessions = []
    for row in rows:
        record = keys.get(row.session_id)
        entry = row.model_dump(mode="json")
        entry["key"] = record.key if record else None
        sessions.append(entry)
    return {"sessions": sessions, "total": total.model_dump(mode="json", exclude={"session_id"})}


def degraded_line(turns: int) -> str:
    """How many turns ran on the cheaper model (`[budgets] degrade_model`)."""
    return (
        f"{turns} turn{'' if turns == 1 else 's'} ran on the cheaper model "
        "([budgets] degrade_model), past degrade_at of a daily budget."
    )


def money(amount: float, unpriced: int) -> str:
    """A cost for a table: `+ unknown` where some calls had no known price."""
    text = format_usd(amount)
    return f"{text} + unknown" if unpriced else text
