"""Figures to tables: what `python -m bench` prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import growth, percentile

# At least 120 columns: the tables are wide, and a pipe would otherwise get 80. No emoji
# codes: Redis keys hold `:m:` and `:key:`, which rich would draw as pictures.
console = Console(highlight=False, emoji=False, width=max(Console().width, 120))


def turn_figures(run: dict[str, Any]) -> dict[str, float]:
    """The summary figures of one `turns` run."""
    ms = run["turn_ms"]
    figures = {
        "turns_per_s": run["turns_per_s"],
        "wall_s": run["wall_s"],
        "ms_per_turn": run["wall_s"] * 1000 / run["turns"],
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "cpu_ms_per_turn": run["cpu_ms_per_turn"],
        "peak_rss_mb": run["peak_rss_mb"],
    }
    if run["sessions"] == 1:
        figures["growth"] = growth(ms)
    return figures


def ratio(ours: float, floor: float) -> str:
    return f"{ours / floor:.2f}x" if floor else "-"


def verdict(met: bool) -> str:
    return "[green]met[/green]" if met else "[red]missed[/red]"


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    shown = Table(title=title, title_justify="left")
    for index, name in enumerate(columns):
        shown.add_column(name, justify="left" if index == 0 else "right")
    for row in rows:
        shown.add_row(*(_cell(v) for v in row))
    console.print(shown)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)
