"""W1 as a person runs it: lines piped into the real `switchboard chat` process.

The process is started once against the fake LLM; one warm-up line is answered first (start-up
is measured apart, by `python -m bench startup`); then every message is written to its stdin at
once, as a pipe would, and each answer line is timed as it arrives. A turn's time is the gap
between one answer and the next: the process reads the next line as soon as it has answered.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import ANSWER, BenchError, cpu_seconds, switchboard_command


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def _answer(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise BenchError(f"switchboard chat ended early (exit {process.wait()})")
    return line.rstrip("\n")


def piped_turns(turns: int, env: dict[str, str], data: Path) -> dict[str, Any]:
    """`turns` messages through `switchboard chat` with piped input; the same figures as
    `bench.child.measure_turns` for one session."""
    command = switchboard_command()
    # stderr to a file: a full pipe nobody reads would stall the process being measured.
    errors = data / "chat-stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [*command, "chat"],
            cwd=data,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )
    assert process.stdin is not None
    try:
        process.stdin.write("what is 17*23?\n")
        process.stdin.flush()
        if (first := _answer(process)) != ANSWER:
            raise BenchError(f"the warm-up turn through switchboard chat answered {first!r}")
        cpu_before = cpu_seconds(process.pid)
        started = last = time.perf_counter()
        process.stdin.write("".join(f"what is 17*23? (message {n + 1})\n" for n in range(turns)))
        process.stdin.flush()
        wall_ms: list[float] = []
        for _ in range(turns):
            answer = _answer(process)
            now = time.perf_counter()
            wall_ms.append((now - last) * 1000)
            last = now
            if answer != ANSWER:
                raise BenchError(f"a turn through switchboard chat answered {answer!r}")
        wall = last - started
        cpu = cpu_seconds(process.pid) - cpu_before
        peak = _peak_rss_mb(process.pid)
        process.stdin.close()
        if process.wait(timeout=30) != 0:
            raise BenchError(f"switchboard chat failed: {errors.read_text().strip()[-300:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {
        "sessions": 1,
        "turns_per_session": turns,
        "turns": turns,
        "wall_s": wall,
        "turns_per_s": turns / wall,
        "turn_ms": wall_ms,
        "turn_cpu_ms": [],
        "cpu_ms_per_turn": cpu * 1000 / turns,
        "peak_rss_mb": peak,
    }
