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

from bench.common import fake_llm, provider_env, run_child
from bench.piped import piped_turns
from bench.report import console, ratio, table, turn_figures, verdict

W1_ENGINES = ("floor", "bare", "bare-whole", "ours", "chat")
W2_ENGINES = ("floor", "bare", "ours")
# Column titles of the engines, in the tables.
TITLES = {
    "floor": "SDK floor",
    "bare": "no-SDK floor",
    "bare-whole": "no-SDK, whole",
    "ours": "ours",
    "chat": "ours, chat piped",
}


def _run(engine: str, vendor: str, url: str, sessions: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as data:
        if engine == "chat":
            return piped_turns(turns, provider_env(vendor, url, Path(data)), Path(data))
        args = ["turns", "--engine", engine, "--vendor", vendor, "--url", url]
        args += ["--sessions", str(sessions), "--turns", str(turns), "--data", data]
        return run_child(args, env=provider_env(vendor, url, Path(data)))


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
) -> tuple[dict[str, dict[str, float]], dict[str, list[dict[str, Any]]]]:
    """Every engine, `repeats` times each, alternating; the median of each figure."""
    runs: dict[str, list[dict[str, Any]]] = {engine: [] for engine in engines}
    with fake_llm(vendor, latency) as url:
        for _ in range(repeats):
            for engine in engines:
                runs[engine].append(_run(engine, vendor, url, sessions, turns))
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


def w1(
    turns: int = 200, vendors: tuple[str, ...] = ("openai", "anthropic"), repeats: int = 3
) -> dict[str, Any]:
    """One session, `turns` messages in a row, each: model -> calculator -> model -> text.

    One table per vendor, an engine a row; the targets compare p50 ms per turn (the median
    is what a busy shared machine disturbs least) with the no-SDK floor's."""
    results: dict[str, Any] = {}
    for vendor in vendors:
        console.print(f"W1 {vendor}: {turns} turns, {len(W1_ENGINES)} engines, {repeats} runs each")
        figures, runs = _compare(vendor, 0.0, 1, turns, repeats, W1_ENGINES)
        floor, bare, ours, chat = (figures[e] for e in ("floor", "bare", "ours", "chat"))
        targets = {
            "in-process p50 ms/turn at most 1.5x the no-SDK floor's": ours["p50_ms"]
            <= 1.5 * bare["p50_ms"],
            "chat piped p50 ms/turn at most 2.5x the no-SDK floor's": chat["p50_ms"]
            <= 2.5 * bare["p50_ms"],
            "growth at most 1.5x": ours["growth"] <= 1.5,
            "peak RSS at most 90 MB": ours["peak_rss_mb"] <= 90,
        }
        results[vendor] = {"figures": figures, "targets": targets, "runs": runs}
        rows: list[list[Any]] = []
        for engine in W1_ENGINES:
            mine = figures[engine]
            row: list[Any] = [TITLES[engine], *(mine[key] for _, key in _W1_FIGURES)]
            row += [ratio(mine["p50_ms"], floor["p50_ms"]), ratio(mine["p50_ms"], bare["p50_ms"])]
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
