"""W3: the distributed deployment's queue path, with 1 and then 2 `switchboard worker` processes.

This process plays the gateway: it puts Telegram-shaped direct messages on the Redis `inbound`
queue (32 conversations at once, each sending its next message once the last was answered)
and takes the answers off `outbound.telegram`. Each phase gets a fresh redis-server; the
workers talk to a fake OpenAI API answering at once.

Each worker may run as many turns at once as there are conversations, so no message waits
for a free place in a worker; at saturation it still waits for the CPU, so the hops (see
bench.driver) are measured a second time with one message at a time, where they are the
queue path's alone.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.common import FAKE_PIDS, BenchError, cpu_seconds, fake_llm, provider_env
from bench.report import console, table, verdict

CONVERSATIONS = 32
TURNS_PER_CONVERSATION = 10


def w3(turns: int = 2000, paced: int = 300) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with fake_llm("openai") as url:
        for workers in (1, 2):
            console.print(f"W3 {workers} worker(s): {turns} turns over the Redis queue ...")
            results[f"{workers}_worker"] = _phase(url, workers, turns, paced)
    one, two = results["1_worker"], results["2_worker"]
    speedup = two["turns_per_s"] / one["turns_per_s"]
    # What 2 cores allow at most: 1 worker is bound by its own CPU per turn, 2 workers by
    # everything's (redis-server, the fake LLM and the gateway share the two cores).
    cpu_one, cpu_two = one["cpu_ms_per_turn"], two["cpu_ms_per_turn"]
    bound = (2000 / sum(cpu_two.values())) / (1000 / cpu_one["workers"])
    hop = max(two["paced"]["pickup_p99_ms"], two["paced"]["outbound_p99_ms"])
    targets = {
        "2 workers at least 1.6x": speedup >= 1.6,
        "Redis hop p99 under 5 ms": hop < 5.0,
    }
    rows: list[list[Any]] = [
        ["turns/s (32 conversations at once)", one["turns_per_s"], two["turns_per_s"]]
    ]
    for name, key in (
        ("turn p50 ms (gateway to final answer)", "turn_p50_ms"),
        ("enqueue -> pick-up p50 / p99 ms", "pickup"),
        ("reply -> outbound p50 / p99 ms", "outbound"),
    ):
        if key in ("pickup", "outbound"):
            rows.append([f"saturated: {name}", _pair(one, key), _pair(two, key)])
        else:
            rows.append([f"saturated: {name}", one[key], two[key]])
    for name in cpu_one:
        rows.append([f"saturated: CPU ms/turn, {name}", cpu_one[name], cpu_two[name]])
    for name, key in (
        ("enqueue -> pick-up p50 / p99 ms", "pickup"),
        ("reply -> outbound p50 / p99 ms", "outbound"),
    ):
        rows.append([f"one at a time: {name}", _pair(one["paced"], key), _pair(two["paced"], key)])
    rows.append(["2 workers / 1 worker (turns/s)", "", f"{speedup:.2f}x"])
    rows.append(["  bound on 2 cores at these CPU costs", "", f"{bound:.2f}x"])
    for name, met in targets.items():
        rows.append([f"target: {name}", "", verdict(met)])
    title = f"W3: Redis inbound queue, {turns} turns (+{paced} one at a time), 0 ms model"
    table(title, ["", "1 worker", "2 workers"], rows)
    return {"speedup": speedup, "cpu_bound_speedup": bound, "targets": targets, **results}


def _pair(figures: dict[str, Any], key: str) -> str:
    return f"{figures[f'{key}_p50_ms']:.2f} / {figures[f'{key}_p99_ms']:.2f}"


def _phase(url: str, workers: int, turns: int, paced: int) -> dict[str, Any]:
    from tests.redis_server import RedisServer

    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="switchboard-w3-")))
        try:
            redis = RedisServer(work / "redis")
            redis.start()
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        stack.callback(redis.stop)
        env = provider_env("openai", url, work / "data")
        env["REDIS_URL"] = redis.url
        pids = [
            stack.enter_context(_worker(env, work / f"worker-{index}.log"))
            for index in range(workers)
        ]
        processes = {
            "workers": pids,
            "redis-server": [redis.process.pid] if redis.process else [],
            "fake LLM": [FAKE_PIDS[url]],
        }
        readings: list[dict[str, float]] = []

        def reading() -> None:
            taken = {name: sum(map(cpu_seconds, ids)) for name, ids in processes.items()}
            taken["driver (gateway)"] = time.process_time()
            readings.append(taken)

        figures = asyncio.run(_drive(redis.url, turns, paced, reading))
        before, after = readings
        figures["cpu_ms_per_turn"] = {
            name: (after[name] - before[name]) * 1000 / figures["turns"] for name in after
        }
        return figures


@contextmanager
def _worker(env: dict[str, str], log: Path) -> Iterator[int]:
    command = shutil.which("switchboard", path=str(Path(sys.executable).parent))
    if command is None:
        raise BenchError("the switchboard command is not installed in this virtualenv")
    with log.open("w") as out:
        process = subprocess.Popen(
            [command, "worker", "--concurrency", str(CONVERSATIONS)],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -15):
            tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
            console.print(f"a worker exited with {process.returncode}: {tail[0]}")


async def _drive(
    redis_url: str, turns: int, paced: int, reading: Callable[[], None]
) -> dict[str, Any]:
    """Warm up; run `turns` turns with CONVERSATIONS at once (`reading` is called just before
    and after, for CPU accounting); then `paced` turns one at a time, where no turn waits for
    another and the hops are the queue path's alone."""
    from bench.driver import ChatDriver
    from core.bus.redis import RedisBus

    bus = await RedisBus.connect(redis_url)
    conversations = max(CONVERSATIONS, turns // TURNS_PER_CONVERSATION)
    try:
        async with ChatDriver(bus) as driver:
            # Warm-up, not measured: workers started and connected, code paths loaded.
            await driver.conversations(CONVERSATIONS, 1, first=conversations)
            driver.measuring = True
            reading()
            started = time.perf_counter()
            await driver.conversations(conversations, TURNS_PER_CONVERSATION, at_once=CONVERSATIONS)
            wall = time.perf_counter() - started
            reading()
            figures = driver.figures()
        async with ChatDriver(bus) as one_by_one:
            one_by_one.measuring = True
            await one_by_one.conversations(
                max(1, paced // TURNS_PER_CONVERSATION),
                TURNS_PER_CONVERSATION,
                at_once=1,
                first=2 * conversations,
            )
    finally:
        await bus.close()
    done = conversations * TURNS_PER_CONVERSATION
    return {
        "turns": done,
        "conversations": conversations,
        "at_once": CONVERSATIONS,
        "worker_concurrency": CONVERSATIONS,
        "wall_s": wall,
        "turns_per_s": done / wall,
        **figures,
        "paced": one_by_one.figures(),
    }
