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
from typing import Any

import pytest

from tests.e2e.processes import REPO, clean_env

pytestmark = pytest.mark.e2e


# Ten engine runs of 10 turns, each in processes of its own (what `bench w1 --quick` runs,
# shorter): about twenty seconds on an idle machine, under a minute on a busy one. The run's
# own timeout comes first (subprocess.run then kills and reaps it), pytest's after it.
SMALLEST_W1 = """
import sys
from pathlib import Path

from bench.common import save
from bench.turns import w1

save("w1-smoke", w1(turns=10, repeats=1), Path(sys.argv[1]))
"""


@pytest.mark.timeout(300)
def test_the_smallest_w1_compares_every_engine_on_both_vendors(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SMALLEST_W1, str(tmp_path)],
        cwd=REPO,
        env=clean_env(tmp_path, redis_url=None),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "W1 openai: one session, 10 turns" in done.stdout
    assert "W1 anthropic: one session, 10 turns" in done.stdout
    [saved] = tmp_path.glob("w1-smoke-*.json")
    report = json.loads(saved.read_text())
    assert report["machine"]["cpus"] >= 1
    for vendor in ("openai", "anthropic"):
        figures = report[vendor]["figures"]
        for engine in ("floor", "bare", "bare-whole", "ours", "chat"):
            [run] = report[vendor]["runs"][engine]
            assert run["turns"] == 10 and len(run["turn_ms"]) == 10
            assert figures[engine]["p50_ms"] > 0 and figures[engine]["peak_rss_mb"] > 0
        assert set(report[vendor]["targets"]) == {
            "in-process p50 ms/turn at most 1.5x the no-SDK floor's",
            "chat piped p50 ms/turn at most 2x the no-SDK floor's",
            "growth at most 1.5x",
            "peak RSS at most 90 MB",
        }


# Three phases of 20 turns (1, 2 and 4 workers) and 50 messages for Redis's memory, each with
# its own redis-server and PostgreSQL database: a minute or two on a busy 2-core machine.
SMALLEST_W3 = """
import sys
from pathlib import Path

from bench.common import save
from bench.distributed import w3

save("w3-smoke", w3(turns=20, paced=10, memory_messages=50, at_once=2), Path(sys.argv[1]))
"""


@pytest.mark.timeout(600)
def test_the_smallest_w3_counts_database_statements_transactions_and_redis_memory(
    tmp_path: Path,
) -> None:
    pytest.importorskip("asyncpg")
    from tests.postgres_server import postgres_bin

    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (`make test-deps` installs it)")
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-c", SMALLEST_W3, str(results)],
        cwd=REPO,
        env=clean_env(tmp_path, redis_url=None),
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "PostgreSQL statements/turn (server)" in done.stdout
    assert "W3: Redis memory as one worker answers 50 messages" in done.stdout
    [saved] = results.glob("w3-smoke-*.json")
    report = json.loads(saved.read_text())
    for workers in (1, 2, 4):
        phase = report[f"{workers}_worker"]
        assert phase["turns"] == 20 and phase["paced_turns"] == 10
        for window in (phase, phase["paced"]):
            assert window["database"]["statements_per_turn"] > 0
            assert window["database"]["transactions_per_turn"] > 0
            assert window["redis"]["server_commands_per_turn"] > 0
        assert phase["cpu_ms_per_turn"]["workers"] > 0
        assert phase["cpu_ms_per_turn"]["postgres (every process)"] > 0
        whole = phase["whole_database"]
        assert whole["pg_stat_database_transactions"] >= whole["commit_rollback_statements"] > 0
    memory = report["redis_memory"]
    assert memory["messages"] == 50
    assert [s["messages"] for s in memory["samples"]] == [0, 10, 20, 30, 40, 50]
    assert all(s["used_memory"] > 0 and s["database_bytes"] > 0 for s in memory["samples"])
    assert memory["key_shapes"]


def _quick_extra(name: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Run `python -m bench NAME --quick` saving to `tmp_path`: what it printed and saved."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", name, "--quick", "--results", str(tmp_path)],
        cwd=REPO,
        env=clean_env(tmp_path, redis_url=None),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [saved] = tmp_path.glob(f"{name}-quick-*.json")
    figures: dict[str, Any] = json.loads(saved.read_text())
    return done.stdout, figures


@pytest.mark.timeout(300)
def test_the_transactions_extra_counts_a_turns_reads_and_writes(tmp_path: Path) -> None:
    printed, figures = _quick_extra("transactions", tmp_path)

    assert "SQL transactions, 20 turns" in printed
    assert figures["turns"] == 20
    # Every turn opens and closes in writes of its own; what only reads is the rest.
    assert figures["writing_per_turn"] >= 2
    assert figures["transactions_per_turn"] == pytest.approx(
        figures["writing_per_turn"] + figures["reading_per_turn"]
    )


@pytest.mark.timeout(300)
def test_the_statements_extra_measures_each_way_of_running_a_statement(tmp_path: Path) -> None:
    printed, figures = _quick_extra("statements", tmp_path)

    assert "One indexed SELECT on SQLite, CPU us (median of 5 x 500)" in printed
    assert (figures["calls"], figures["rounds"]) == (500, 5)
    # Each way the table names was measured (the floor, the engine's three ways, the two
    # transactions), with a figure of its own.
    assert sorted(figures["cpu_us"]) == [
        "SQLAlchemy: Core, built each call",
        "SQLAlchemy: Core, built once",
        "SQLAlchemy: exec_driver_sql",
        "sqlite3: read transaction",
        "sqlite3: statement",
        "store engine: read transaction",
    ]
    assert all(micros > 0 for micros in figures["cpu_us"].values())
