"""W1 (one long conversation) and W2 (many at once): our runtime beside both floor loops.

The floors: `floor` on the official SDK's low-level `post` (bench.floor), and `bare` with no
SDK at all, one plain HTTP client (bench.bare; `bare-whole` is the same not streamed). W1 also
runs `chat`: the lines piped into the real `switchboard chat` process (bench.piped).

Every run is a process of its own against a fake LLM process, so each figure (CPU, memory) is
that engine's alone. The engines take turns (floor, bare, ..., ours, floor, bare, ...) and each
figure is the median over the repeats: a shared machine's noise hits all alike and no single
run decides.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.against import (
    CHAT_OVER_FLOOR,
    THIS_TREE,
    Tree,
    shown_ratio,
    shown_verdict,
    within,
)
from bench.common import fake_llm, provider_env, run_child
from bench.piped import piped_turns
from bench.report import console, ratio, table, turn_figures, verdict

W1_ENGINES = ("floor", "bare", "bare-whole", "ours", "chat")
# The engines that run the product (the others are the bench's own floor loops): with
# `--against`, these run from the other tree too.
PRODUCT = ("ours", "chat")
W2_ENGINES = ("floor", "bare", "ours")
# Column titles of the engines, in the tables.
TITLES = {
    "floor": "SDK floor",
    "bare": "no-SDK floor",
    "bare-whole": "no-SDK, whole",
    "ours": "ours",
    "chat": "ours, chat piped",
}


def _run(
    engine: str, vendor: str, url: str, sessions: int, turns: int, tree: Tree = THIS_TREE
) -> dict[str, Any]:
    """One engine's run; `ours` and `chat` run the product of `tree` (the floors are ours)."""
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as data:
        env = tree.env(provider_env(vendor, url, Path(data)))
        if engine == "chat":
            return piped_turns(turns, env, Path(data))
        args = ["turns", "--engine", engine, "--vendor", vendor, "--url", url]
        args += ["--sessions", str(sessions), "--turns", str(turns), "--data", data]
        return run_child(args, env=env, cwd=tree.root)


def yardstick_cpu_ms(url: str, turns: int = 200) -> float:
    """CPU ms per turn of W1's no-SDK floor (one session, OpenAI, the fake LLM at `url`): what
    this machine's speed is at the moment, for figures compared across runs and machines."""
    return turn_figures(_run("bare", "openai", url, 1, turns))["cpu_ms_per_turn"]


def _compare(
    vendor: str,
    latency: float,
    sessions: int,
    turns: int,
    repeats: int,
    engines: tuple[str, ...],
    against: Tree | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, list[dict[str, Any]]]]:
    """Every engine, `repeats` times each, alternating; the median of each figure. With
    `against`, the product engines (`ours`, `chat`) run again from that tree, as
    `rev-ours` and `rev-chat`, each right after this tree's."""
    order = [
        (name, tree)
        for engine in engines
        for name, tree in (
            [(engine, THIS_TREE)]
            + ([(f"rev-{engine}", against)] if against and engine in PRODUCT else [])
        )
    ]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in order}
    with fake_llm(vendor, latency) as url:
        for _ in range(repeats):
            for name, tree in order:
                engine = name.removeprefix("rev-")
                runs[name].append(_run(engine, vendor, url, sessions, turns, tree))
    figures = {}
    for engine, done in runs.items():
        each = [turn_figures(run) for run in done]
        figures[engine] = {key: statistics.median(f[key] for f in each) for key in each[0]}
    return figures, runs


_W1_FIGURES = (
    ("ms/turn", "ms_per_turn"),
    ("p50 ms", "p50_ms"),
    ("p95 ms", "p95_ms"),
    ("CPU ms/turn", "cpu_ms_per_turn"),
    ("peak RSS MB", "peak_rss_mb"),
    ("growth", "growth"),
)


def w1_targets(figures: dict[str, dict[str, float]]) -> dict[str, bool]:
    """W1's targets, judged on this tree's medians (p50s: what a busy machine moves least)."""
    bare, ours, chat = figures["bare"], figures["ours"], figures["chat"]
    return {
        "in-process p50 ms/turn at most 1.5x the no-SDK floor's": ours["p50_ms"]
        <= 1.5 * bare["p50_ms"],
        f"chat piped p50 ms/turn at most {CHAT_OVER_FLOOR:g}x the no-SDK floor's": bool(
            within(chat["p50_ms"], bare["p50_ms"], CHAT_OVER_FLOOR)
        ),
        "growth at most 1.5x": ours["growth"] <= 1.5,
        "peak RSS at most 90 MB": ours["peak_rss_mb"] <= 90,
    }


_AGAINST_FIGURES = (
    ("p50 ms/turn", "p50_ms"),
    ("CPU ms/turn", "cpu_ms_per_turn"),
    ("peak RSS MB", "peak_rss_mb"),
)


def w1_comparison(figures: dict[str, dict[str, float]], rev: str) -> list[list[Any]]:
    """The rows of W1's table against REV: this tree, REV, the no-SDK floor and the ratios,
    for the `switchboard chat` path and in process; last, the chat path's target for both."""
    bare = figures["bare"]
    rows: list[list[Any]] = []
    for engine, path in (("chat", "chat piped"), ("ours", "in process")):
        mine, theirs = figures[engine], figures[f"rev-{engine}"]
        for name, key in _AGAINST_FIGURES:
            floor = bare[key]
            rows.append(
                [
                    f"{path}: {name}",
                    mine[key],
                    theirs[key],
                    floor,
                    shown_ratio(mine[key], floor),
                    shown_ratio(theirs[key], floor),
                    shown_ratio(mine[key], theirs[key]),
                ]
            )
    target = f"target: chat piped p50 within {CHAT_OVER_FLOOR:g}x the floor"
    rows.append(
        [
            target,
            *(
                shown_verdict(within(figures[e]["p50_ms"], bare["p50_ms"], CHAT_OVER_FLOOR))
                for e in ("chat", "rev-chat")
            ),
            "",
            "",
            "",
            "",
        ]
    )
    return rows


def w1(
    turns: int = 200,
    vendors: tuple[str, ...] = ("openai", "anthropic"),
    repeats: int = 3,
    against: Tree | None = None,
) -> dict[str, Any]:
    """One session, `turns` messages in a row, each: model -> calculator -> model -> text.

    One table per vendor, an engine a row; the targets compare p50 ms per turn (the median
    is what a busy shared machine disturbs least) with the no-SDK floor's. With `against`,
    the product engines run from that tree too, and a second table sets the two side by
    side with the floor."""
    results: dict[str, Any] = {}
    for vendor in vendors:
        engines = len(W1_ENGINES) + (len(PRODUCT) if against else 0)
        console.print(f"W1 {vendor}: {turns} turns, {engines} engines, {repeats} runs each")
        figures, runs = _compare(vendor, 0.0, 1, turns, repeats, W1_ENGINES, against)
        floor = figures["floor"]
        targets = w1_targets(figures)
        results[vendor] = {"figures": figures, "targets": targets, "runs": runs}
        rows: list[list[Any]] = []
        for engine in figures:
            mine = figures[engine]
            label = TITLES.get(engine)
            if label is None and against is not None:
                label = f"{TITLES[engine.removeprefix('rev-')]}, {against.label}"
            row: list[Any] = [label, *(mine[key] for _, key in _W1_FIGURES)]
            row += [
                ratio(mine["p50_ms"], floor["p50_ms"]),
                ratio(mine["p50_ms"], figures["bare"]["p50_ms"]),
            ]
            rows.append(row)
        columns = ["", *(name for name, _ in _W1_FIGURES), "p50/SDK", "p50/no-SDK"]
        title = f"W1 {vendor}: one session, {turns} turns, 0 ms model (medians of {repeats} runs)"
        table(title, columns, rows)
        for name, met in targets.items():
            console.print(f"  target: {name}: {verdict(met)}")
        console.print(
            f"  growth = mean of turns {turns - 19}-{turns} over turns 1-20; "
            "ms/turn = wall time / turns"
        )
        if against is not None:
            results[vendor]["against"] = {
                "rev": against.label,
                "chat_target_rev": within(
                    figures["rev-chat"]["p50_ms"], figures["bare"]["p50_ms"], CHAT_OVER_FLOOR
                ),
            }
            table(
                f"W1 {vendor}: this tree against {against.label}, in the same run",
                [
                    "",
                    "this tree",
                    against.label,
                    "no-SDK floor",
                    "this/floor",
                    "REV/floor",
                    "this/REV",
                ],
                w1_comparison(figures, against.label),
            )
    return results


def w2(vendor: str = "openai", scale: float = 1.0, repeats: int = 1) -> dict[str, Any]:
    """50 sessions x 20 turns at once (0 ms), and 1,000 sessions x 1 turn (200 ms model)."""
    at_once, many = max(2, round(50 * scale)), max(2, round(1000 * scale))
    shapes = [
        (f"{at_once:,} x 20, 0 ms", at_once, 20, 0.0),
        (f"{many:,} x 1, 200 ms", many, 1, 0.2),
    ]
    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for label, sessions, turns, latency in shapes:
        console.print(f"W2 {sessions} sessions x {turns} turns at once, {latency * 1000:g} ms ...")
        figures, runs = _compare(vendor, latency, sessions, turns, repeats, W2_ENGINES)
        floor, bare, ours = figures["floor"], figures["bare"], figures["ours"]
        met = ours["wall_s"] <= 2 * floor["wall_s"]
        results[label] = {
            "sessions": sessions,
            "turns_per_session": turns,
            "model_latency_s": latency,
            "figures": figures,
            "targets": {"wall time within 2x the floor": met},
            "runs": runs,
        }
        for name, key in (
            ("wall s", "wall_s"),
            ("turns/s", "turns_per_s"),
            ("p50 ms/turn", "p50_ms"),
            ("p95 ms/turn", "p95_ms"),
            ("CPU ms/turn", "cpu_ms_per_turn"),
            ("peak RSS MB", "peak_rss_mb"),
        ):
            rows.append(
                [
                    f"{label}: {name}",
                    floor[key],
                    bare[key],
                    ours[key],
                    ratio(ours[key], floor[key]),
                    ratio(ours[key], bare[key]),
                ]
            )
        rows.append(
            [f"{label} target: wall time within 2x the SDK floor", "", "", "", "", verdict(met)]
        )
    columns = ["", "SDK floor", "no-SDK floor", "ours", "ours/SDK", "ours/no-SDK"]
    table(f"W2: sessions at once ({vendor})", columns, rows)
    return results
