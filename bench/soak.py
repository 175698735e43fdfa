"""W4: a long run through the worker path, memory sampled, in both deployments.

Embedded: a process of its own runs what `switchboard serve` runs for its chats (the worker,
the in-process bus and mailboxes, SQLite, the real OpenAI provider against a fake answering at
once) and a stand-in gateway (bench.driver) in the same process.

Redis: a `switchboard worker` process on a redis-server of its own; this process is the
stand-in gateway (not measured: it is the bench's driver), and the worker's RSS is read from
/proc.

Each sends 10,000 messages: 1,000 conversations of 10 messages, 50 of them at a time. RSS is
sampled every 250 messages.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import _PAGE, ROOT, BenchError, fake_llm, provider_env, run_child
from bench.distributed import bench_profile
from bench.report import console, table, verdict

CONVERSATIONS_AT_ONCE = 50
MESSAGES_PER_CONVERSATION = 10
SAMPLE_EVERY = 250
# Caches and allocator pools fill during the first messages; growth after them is the figure.
WARM_UP = 1000
GROWTH_TARGET_MB = 5.0


def w4(messages: int = 10_000) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    with fake_llm("openai") as url:
        console.print(f"W4 soak, embedded: {messages:,} messages through the worker path ...")
        runs["embedded"] = _embedded(url, messages)
        console.print(f"W4 soak, Redis: {messages:,} messages through a `switchboard worker` ...")
        runs["redis worker"] = _redis(url, messages)
    warm = min(WARM_UP, messages // 10)
    figures = {name: _figures(run, warm) for name, run in runs.items()}
    target = f"RSS growth under {GROWTH_TARGET_MB:g} MB"
    targets = {
        f"{name}: {target}": f["growth_after_warm_up_mb"] < GROWTH_TARGET_MB
        for name, f in figures.items()
    }
    names = list(figures)
    rows: list[list[Any]] = [
        ["messages", *(f"{figures[n]['messages']:,}" for n in names)],
        ["turns/s", *(figures[n]["turns_per_s"] for n in names)],
        ["RSS at start MB", *(figures[n]["rss_start_mb"] for n in names)],
        [f"RSS after {warm:,} messages MB", *(figures[n]["rss_after_warm_up_mb"] for n in names)],
        ["RSS at the end MB", *(figures[n]["rss_end_mb"] for n in names)],
        ["growth after warm-up MB", *(figures[n]["growth_after_warm_up_mb"] for n in names)],
        ["growth from start MB", *(figures[n]["growth_from_start_mb"] for n in names)],
        [f"target: {target}", *(verdict(targets[f"{n}: {target}"]) for n in names)],
    ]
    table("W4: soak through the worker path", ["", *names], rows)
    return {
        "figures": figures,
        "targets": targets,
        "rss_samples": {name: run["rss_samples"] for name, run in runs.items()},
        "warm_up": warm,
    }


def _figures(run: dict[str, Any], warm: int) -> dict[str, Any]:
    samples: list[tuple[int, float]] = [tuple(s) for s in run["rss_samples"]]
    base = next((rss for done, rss in samples if done >= warm), samples[0][1])
    end = samples[-1][1]
    return {
        "messages": run["messages"],
        "wall_s": run["wall_s"],
        "turns_per_s": run["messages"] / run["wall_s"],
        "rss_start_mb": samples[0][1],
        "rss_after_warm_up_mb": base,
        "rss_end_mb": end,
        "growth_after_warm_up_mb": end - base,
        "growth_from_start_mb": end - samples[0][1],
        "peak_rss_mb": run.get("peak_rss_mb", max(rss for _, rss in samples)),
    }


def _embedded(url: str, messages: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="switchboard-w4-") as data:
        env = provider_env("openai", url, Path(data))
        env["SWITCHBOARD_PROFILES_DIR"] = str(bench_profile(Path(data) / "profiles"))
        return run_child(
            ["soak", "--url", url, "--messages", str(messages), "--data", data],
            env=env,
            timeout=3600,
        )


def _redis(url: str, messages: int) -> dict[str, Any]:
    from tests.redis_server import RedisServer

    with tempfile.TemporaryDirectory(prefix="switchboard-w4-redis-") as folder:
        work = Path(folder)
        try:
            redis = RedisServer(work / "redis")
            redis.start()
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        try:
            env = provider_env("openai", url, work / "data")
            env["REDIS_URL"] = redis.url
            env["SWITCHBOARD_PROFILES_DIR"] = str(bench_profile(work / "profiles"))
            log = work / "worker.log"
            with log.open("w") as out:
                worker = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.probe",
                        "worker",
                        "--concurrency",
                        str(CONVERSATIONS_AT_ONCE),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=out,
                )
            try:
                return asyncio.run(_drive_worker(redis.url, worker.pid, messages))
            finally:
                worker.terminate()
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
        finally:
            redis.stop()


async def _drive_worker(redis_url: str, pid: int, messages: int) -> dict[str, Any]:
    from bench.driver import ChatDriver
    from core.backends.redis.bus import RedisBus
    from core.backends.redis.mailboxes import RedisMailboxes

    bus = await RedisBus.connect(redis_url)
    mailboxes = RedisMailboxes.from_url(redis_url)
    samples: list[tuple[int, float]] = []
    try:
        async with ChatDriver(bus, mailboxes) as driver:
            # One message first, so the worker's start-up (imports, connections) is done.
            await driver.conversations(1, 1, first=messages)
            driver.answered = 0

            def sample() -> None:
                if driver.answered % SAMPLE_EVERY == 0:
                    samples.append((driver.answered, process_rss_mb(pid)))

            samples.append((0, process_rss_mb(pid)))
            started = time.perf_counter()
            await driver.conversations(
                messages // MESSAGES_PER_CONVERSATION,
                MESSAGES_PER_CONVERSATION,
                at_once=CONVERSATIONS_AT_ONCE,
                after_turn=sample,
            )
            wall = time.perf_counter() - started
    finally:
        await bus.close()
        await mailboxes.aclose()
    return {"messages": driver.answered, "wall_s": wall, "rss_samples": samples}


def process_rss_mb(pid: int) -> float:
    """Another process's resident memory now, in MB."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6
