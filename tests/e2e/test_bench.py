"""The benchmark harness runs end to end (the smallest W1) and saves what it printed.

No figure is judged here: performance targets are printed by `make bench`, never asserted.
What is checked is that the harness still drives every engine (the SDK floor, the no-SDK
floor streamed and not, ours in process and through `switchboard chat` piped) against both
fake APIs, that every turn ended with the calculator's answer (the harness refuses to save
otherwise) and that the saved JSON holds the figures the tables show.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.processes import REPO, clean_env

pytestmark = pytest.mark.e2e


# The harness runs ten engine runs of 40 turns, each in processes of its own: about half a
# minute on an idle machine, over a minute on a busy one. The run's own timeout comes first
# (subprocess.run then kills and reaps it), pytest's after it.
@pytest.mark.timeout(300)
def test_the_quick_w1_compares_every_engine_on_both_vendors(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "w1", "--quick", "--results", str(tmp_path)],
        cwd=REPO,
        env=clean_env(tmp_path, redis_url=None),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "W1 openai: one session, 40 turns" in done.stdout
    assert "W1 anthropic: one session, 40 turns" in done.stdout
    [saved] = tmp_path.glob("w1-quick-*.json")
    report = json.loads(saved.read_text())
    assert report["machine"]["cpus"] >= 1
    for vendor in ("openai", "anthropic"):
        figures = report[vendor]["figures"]
        for engine in ("floor", "bare", "bare-whole", "ours", "chat"):
            [run] = report[vendor]["runs"][engine]
            assert run["turns"] == 40 and len(run["turn_ms"]) == 40
            assert figures[engine]["p50_ms"] > 0 and figures[engine]["peak_rss_mb"] > 0
        assert set(report[vendor]["targets"]) == {
            "in-process p50 ms/turn at most 1.5x the no-SDK floor's",
            "chat piped p50 ms/turn at most 2.5x the no-SDK floor's",
            "growth at most 1.5x",
            "peak RSS at most 90 MB",
        }
