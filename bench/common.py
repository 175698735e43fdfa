"""What every workload shares: the fake LLM process, child processes, figures and the report."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
_PAGE = os.sysconf("SC_PAGE_SIZE")

# What the fake LLM expects and answers (bench.fake_llm); kept here so that measured
# processes need not import the fake's server code.
API_KEY = "bench-key"
EXPRESSION = "17*23"
ANSWER = "The answer is 391 (17*23, worked out with the calculator)."


class BenchError(Exception):
    """A workload could not run; the message says why, in one line."""


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6


def peak_rss_mb() -> float:
    """The most resident memory this process has had, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces; the fields after its closing parenthesis do not.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, interpolated; 0 for none."""
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def growth(per_turn: Sequence[float], window: int = 20) -> float:
    """Mean of the last `window` turns over the mean of the first `window`."""
    if len(per_turn) < 2 * window:
        window = max(1, len(per_turn) // 2)
    first = statistics.fmean(per_turn[:window])
    last = statistics.fmean(per_turn[-window:])
    return last / first if first else 0.0


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), ""
            )
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


# The process id of each running fake LLM, by its URL (for CPU accounting).
FAKE_PIDS: dict[str, int] = {}


@contextmanager
def fake_llm(vendor: str, latency: float = 0.0) -> Iterator[str]:
    """A fake LLM API process; yields its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.fake_llm",
            vendor,
            "--latency",
            str(latency),
            "--until-stdin-closes",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("ready "):
            raise BenchError(f"the fake {vendor} API did not start (exit {process.poll()})")
        FAKE_PIDS[line.split()[1]] = process.pid
        yield line.split()[1]
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def provider_env(vendor: str, url: str, data_dir: Path) -> dict[str, str]:
    """Environment for Switchboard code that should talk to the fake `vendor` at `url`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SWITCHBOARD_", "OPENAI_", "ANTHROPIC_", "REDIS_", "TELEGRAM_"))
        and not k.startswith(("SLACK_", "DISCORD_"))
    }
    env.update(
        {
            "SWITCHBOARD_PROVIDER": vendor,
            "SWITCHBOARD_DATA_DIR": str(data_dir),
            "SWITCHBOARD_PROFILES_DIR": str(ROOT / "profiles"),
            "SWITCHBOARD_LOG_LEVEL": "warning",
            f"{vendor.upper()}_API_KEY": API_KEY,
            f"{vendor.upper()}_BASE_URL": url,
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def switchboard_command() -> list[str]:
    """How to start the `switchboard` program a person would run: the console script beside
    this interpreter (the same environment), else `python -m bots`, which is the same CLI."""
    script = Path(sys.executable).parent / "switchboard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bots"]


def run_child(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    timeout: float = 900,
    cwd: Path = ROOT,
) -> dict[str, Any]:
    """Run `python -m bench.child ARGS` in `cwd` (a source tree: whose `bench.child` runs)
    and return the JSON it prints last."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bench.child", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise BenchError(f"bench.child {' '.join(args)} failed (exit {done.returncode}): {tail}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise BenchError(f"bench.child {' '.join(args)} printed no result")
    result: dict[str, Any] = json.loads(lines[-1])
    result.setdefault("process_seconds", round(time.monotonic() - started, 2))
    return result


def save(workload: str, payload: dict[str, Any], folder: Path = RESULTS) -> Path:
    """Write one workload's figures to <folder>/<workload>-<UTC time>.json."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{workload}-{stamp}.json"
    body = {"workload": workload, "at": stamp, "machine": machine(), **payload}
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path
