"""W1 (one long conversation) and W2 (many at once): our runtime beside the floor loop.

Every run is a process of its own against a fake LLM process, so each figure (CPU, memory) is
that engine's alone. The engines take turns (floor, ours, floor, ours, ...) and each figure is
the median over the repeats: a shared machine's noise hits both alike and no single run
decides.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import fake_llm, provider_env, run_child
from bench.report import console, ratio, table, turn_figures, verdict

ENGINES = ("floor", "ours")


def _run(engine: str, vendor: str, url: str, sessions: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as data:
        args = ["turns", "--engine", engine, "--vendor", vendor, "--url", url]
        args += ["--sessions", str(sessions), "--turns", str(turns), "--data", data]
        return run_child(args, env=provider_env(vendor, url, Path(data)))


def _compare(
    vendor: str, latency: float, sessions: int, turns: int, repeats: int
) -> tuple[dict[str, dict[str, float]], dict[str, list[dict[str, Any]]]]:
    """Both engines, `repeats` times each, alternating; the median of each figure."""
    runs: dict[str, list[dict[str, Any]]] = {engine: [] for engine in ENGINES}
    with fake_llm(vendor, latency) as url:
        for _ in range(repeats):
            for engine in ENGINES:
                runs[engine].append(_run(engine, vendor, url, sessions, turns))
    figures = {}
    for engine, done in runs.items():
        each = [turn_figures(run) for run in done]
        figures[engine] = {key: statistics.median(f[key] for f in each) for key in each[0]}
    return figures, runs


def w1(
    turns: int = 200, vendors: tuple[str, ...] = ("openai", "anthropic"), repeats: int = 3
) -> dict[str, Any]:
    """One session, `turns` messages in a row, each: model -> calculator -> model -> text."""
    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for vendor in vendors:
        console.print(f"W1 {vendor}: {turns} turns, floor and ours, {repeats} runs each ...")
        figures, runs = _compare(vendor, 0.0, 1, turns, repeats)
        floor, ours = figures["floor"], figures["ours"]
        targets = {
            "p50 within 2.5x the floor": ours["p50_ms"] <= 2.5 * floor["p50_ms"],
            "growth at most 1.5x": ours["growth"] <= 1.5,
            "peak RSS at most 90 MB": ours["peak_rss_mb"] <= 90,
        }
        results[vendor] = {"figures": figures, "targets": targets, "runs": runs}
        for name, key in (
            ("turns/s", "turns_per_s"),
            ("p50 ms/turn", "p50_ms"),
            ("p95 ms/turn", "p95_ms"),
            ("CPU ms/turn", "cpu_ms_per_turn"),
            ("peak RSS MB", "peak_rss_mb"),
            (f"growth (turns {turns - 19}-{turns} / 1-20)", "growth"),
        ):
            rows.append([f"{vendor}: {name}", floor[key], ours[key], ratio(ours[key], floor[key])])
        rows.extend(
            [f"{vendor} target: {name}", "", "", verdict(met)] for name, met in targets.items()
        )
    columns = ["", "floor", "ours", "ours/floor"]
    table(f"W1: one session, {turns} turns, 0 ms model (medians of {repeats} runs)", columns, rows)
    return results


def w2(vendor: str = "openai", scale: float = 1.0, repeats: int = 1) -> dict[str, Any]:
    """50 sessions x 20 turns at once (0 ms), and 1,000 sessions x 1 turn (200 ms model)."""
    shapes = [
        ("50 x 20, 0 ms", max(2, round(50 * scale)), 20, 0.0),
        ("1,000 x 1, 200 ms", max(2, round(1000 * scale)), 1, 0.2),
    ]
    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    for label, sessions, turns, latency in shapes:
        console.print(f"W2 {sessions} sessions x {turns} turns at once, {latency * 1000:g} ms ...")
        figures, runs = _compare(vendor, latency, sessions, turns, repeats)
        floor, ours = figures["floor"], figures["ours"]
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
            rows.append([f"{label}: {name}", floor[key], ours[key], ratio(ours[key], floor[key])])
        rows.append([f"{label} target: wall time within 2x the floor", "", "", verdict(met)])
    table(f"W2: sessions at once ({vendor})", ["", "floor", "ours", "ours/floor"], rows)
    return results
