"""W4: a long run through the worker path, memory sampled.

A process of its own runs what `switchboard serve` runs for its chats (the worker, the
in-process bus and mailboxes, SQLite, the real OpenAI provider against a fake answering at
once) and a stand-in gateway (bench.driver) that sends 10,000 messages: 1,000 conversations of
10 messages, 50 of them at a time. RSS is sampled every 250 messages.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.common import fake_llm, provider_env, run_child
from bench.report import console, table, verdict

CONVERSATIONS_AT_ONCE = 50
MESSAGES_PER_CONVERSATION = 10
SAMPLE_EVERY = 250
# Caches and allocator pools fill during the first messages; growth after them is the figure.
WARM_UP = 1000


def w4(messages: int = 10_000) -> dict[str, Any]:
    with fake_llm("openai") as url, tempfile.TemporaryDirectory(prefix="switchboard-w4-") as data:
        console.print(f"W4 soak: {messages:,} messages through the worker path ...")
        run = run_child(
            ["soak", "--url", url, "--messages", str(messages), "--data", data],
            env=provider_env("openai", url, Path(data)),
            timeout=3600,
        )
    samples: list[tuple[int, float]] = [tuple(s) for s in run["rss_samples"]]
    warm = min(WARM_UP, messages // 10)
    base = next((rss for done, rss in samples if done >= warm), samples[0][1])
    end = samples[-1][1]
    figures = {
        "messages": run["messages"],
        "wall_s": run["wall_s"],
        "turns_per_s": run["messages"] / run["wall_s"],
        "rss_start_mb": samples[0][1],
        "rss_after_warm_up_mb": base,
        "rss_end_mb": end,
        "growth_after_warm_up_mb": end - base,
        "growth_from_start_mb": end - samples[0][1],
        "peak_rss_mb": run["peak_rss_mb"],
    }
    targets = {"RSS growth under 10 MB": figures["growth_after_warm_up_mb"] < 10}
    rows = [
        ["messages", f"{run['messages']:,}"],
        ["turns/s", figures["turns_per_s"]],
        ["RSS at start MB", figures["rss_start_mb"]],
        [f"RSS after {warm:,} messages MB", base],
        ["RSS at the end MB", end],
        ["growth after warm-up MB", figures["growth_after_warm_up_mb"]],
        ["growth from start MB", figures["growth_from_start_mb"]],
        ["target: RSS growth under 10 MB", verdict(targets["RSS growth under 10 MB"])],
    ]
    table("W4: soak through the worker path", ["", "figure"], rows)
    return {"figures": figures, "targets": targets, "rss_samples": samples, "warm_up": warm}
