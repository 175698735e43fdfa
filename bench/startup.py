"""Start-up: how long `switchboard --help` takes, and `switchboard chat` until it can read.

Each command runs `runs` times after one unmeasured run (warm: the OS has the files cached and
Python its bytecode), as a person would start it, from a fresh process each time. The
commands run with Python's bytecode cache on even where the environment turns it off
(`PYTHONDONTWRITEBYTECODE`, set in some sandboxes and images): without it every start
compiles Switchboard's own modules again (about 0.13 s on a 2-core machine), which a usual
installation pays at most once (`pip install` compiles a package; a checkout writes the
bytecode on its first start).

- `--help`: start to exit.
- `chat` ready: start until the answer to a first line (`/help`, answered by the terminal
  without the model) is on stdout: what a person waits for before typing makes sense.
- `chat` empty input: start to exit with nothing piped in (includes closing the store).

The model provider is configured (OpenAI at an address nothing answers on): a provider is
built at start as it is for real use, and no call is made.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, percentile, provider_env, switchboard_command
from bench.report import console, table, verdict

TARGETS_S = {"help": 0.3, "chat_ready": 0.5}


def _timed(args: list[str], env: dict[str, str], stdin: str | None, cwd: Path) -> float:
    """Seconds from start until the first line of stdout (or the exit, if none comes)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        args,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    if stdin:
        process.stdin.write(stdin)
        process.stdin.flush()
    if not stdin:
        process.stdin.close()
        process.stdout.read()
        process.wait()
        elapsed = time.perf_counter() - started
    else:
        first = process.stdout.readline()
        elapsed = time.perf_counter() - started
        process.stdin.close()
        process.stdout.read()
        process.wait()
        if not first:
            raise BenchError(f"{' '.join(args)} printed nothing (exit {process.returncode})")
    if process.returncode != 0:
        raise BenchError(f"{' '.join(args)} failed (exit {process.returncode})")
    return elapsed


def startup(runs: int = 10) -> dict[str, Any]:
    """Time the three start-ups `runs` times each, interleaved; medians against the targets."""
    command = switchboard_command()
    shapes = {
        "help": ([*command, "--help"], None),
        "chat_ready": ([*command, "chat"], "/help\n"),
        "chat_empty_input": ([*command, "chat"], ""),
    }
    seconds: dict[str, list[float]] = {name: [] for name in shapes}
    with tempfile.TemporaryDirectory(prefix="switchboard-startup-") as folder:
        data = Path(folder)
        env = provider_env("openai", "http://127.0.0.1:9/v1", data)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up run writes the bytecode
        console.print(f"start-up: {len(shapes)} commands, {runs} runs each after a warm-up ...")
        for args, stdin in shapes.values():
            _timed(args, env, stdin, data)  # warm-up, not counted
        for _ in range(runs):
            for name, (args, stdin) in shapes.items():
                seconds[name].append(_timed(args, env, stdin, data))
    figures: dict[str, dict[str, Any]] = {
        name: {
            "median_s": statistics.median(values),
            "min_s": min(values),
            "p90_s": percentile(values, 90),
            "runs_s": values,
        }
        for name, values in seconds.items()
    }
    targets = {
        f"{name} median within {limit:g} s": figures[name]["median_s"] <= limit
        for name, limit in TARGETS_S.items()
    }
    titles = {
        "help": "switchboard --help",
        "chat_ready": "switchboard chat: ready (first line answered)",
        "chat_empty_input": "switchboard chat: empty input, to exit",
    }
    rows = [[titles[name], f["median_s"], f["min_s"], f["p90_s"]] for name, f in figures.items()]
    table(f"Start-up, warm ({runs} runs each)", ["", "median s", "min s", "p90 s"], rows)
    for name, met in targets.items():
        console.print(f"  target: {name}: {verdict(met)}")
    return {"runs": runs, "figures": figures, "targets": targets, "load": os.getloadavg()}
