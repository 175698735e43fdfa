"""W3: the distributed deployment's queue path, with 1, 2 and 4 `switchboard worker` processes.

This process plays the gateway: it puts Telegram-shaped direct messages in their sessions'
mailboxes in Redis (32 conversations at once, each sending its next message once the last was
answered) and takes the answers off `outbound.telegram`. Each phase gets a fresh redis-server; the
workers talk to a fake OpenAI API answering at once.

Each worker may run as many turns at once as there are conversations, so no message waits
for a free place in a worker; at saturation it still waits for the CPU, so the hops (see
bench.driver) are measured a second time with one message at a time, where they are the
queue path's alone.

The workers run through `bench.probe`, which counts their Redis round trips (a pipeline or a
script is one) and the commands they send; redis-server's `INFO commandstats` adds what every
client caused, scripts' inner commands included. Both are printed per turn.

The records are in PostgreSQL (`DATABASE_URL`), on a server the bench starts (bench.database),
a database of its own for each phase: the server's counts of the statements and transactions
it ran for it are printed per turn, with its CPU. Last, one worker answers 10,000 messages and
Redis's memory is read as they go (bench.redis_memory): with the records in the database it
should not grow with the history.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench import database
from bench.against import (
    THIS_TREE,
    WORKER_CPU_OVER_REV,
    Tree,
    shown_ratio,
    shown_verdict,
    within,
)
from bench.common import FAKE_PIDS, ROOT, BenchError, cpu_seconds, fake_llm, provider_env
from bench.probe import COUNTS_ENV, ask_counts
from bench.report import console, table, verdict
from bench.turns import yardstick_cpu_ms

CONVERSATIONS = 32
TURNS_PER_CONVERSATION = 10
WORKER_COUNTS = (1, 2, 4)
# The worker's own target (docs/performance.md).
CPU_TARGET_MS = 6.0


def w3(
    turns: int = 2000,
    paced: int = 300,
    memory_messages: int = 10_000,
    at_once: int = CONVERSATIONS,
    against: Tree | None = None,
) -> dict[str, Any]:
    """`at_once` conversations at a time (fewer only to try the harness out: the tests).
    With `against`, each phase runs a second time right after, the workers from that tree."""
    from bench.redis_memory import redis_memory

    results: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    with database.postgres() as server, fake_llm("openai") as url:
        for workers in WORKER_COUNTS:
            console.print(
                f"W3 {workers} worker(s): {turns} turns over the Redis queue, PostgreSQL ..."
            )
            # The machine's speed just before the phase: a shared machine's moves by a third
            # from one minute to the next, and the CPU figures move with it.
            yardstick = yardstick_cpu_ms(url, 200 if turns >= 1000 else 40)
            results[f"{workers}_worker"] = _phase(url, server, workers, turns, paced, at_once)
            results[f"{workers}_worker"]["yardstick_cpu_ms"] = yardstick
            if against is not None:
                console.print(f"W3 {workers} worker(s), {against.label}: the same ...")
                theirs[f"{workers}_worker"] = _phase(
                    url, server, workers, turns, paced, at_once, against
                )
        console.print(f"W3 Redis memory: {memory_messages:,} messages through one worker ...")
        results["redis_memory"] = redis_memory(url, server, memory_messages, at_once)
    phases = [results[f"{n}_worker"] for n in WORKER_COUNTS]
    one, two = phases[0], phases[1]
    speedup = two["turns_per_s"] / one["turns_per_s"]
    cores = os.cpu_count() or 1
    for workers, phase in zip(WORKER_COUNTS, phases, strict=True):
        phase["cpu_bound_turns_per_s"] = _bound(workers, cores, phase["cpu_ms_per_turn"])
    hop = max(two["paced"]["pickup_p99_ms"], two["paced"]["outbound_p99_ms"])
    # What the CPU costs let 2 workers reach over 1 on this machine (see `_bound`).
    allowed = two["cpu_bound_turns_per_s"] / one["cpu_bound_turns_per_s"]
    # Each target, judged per phase (None: not judged there).
    targets: dict[str, list[bool | None]] = {
        f"2 workers at least 1.6x (the CPU bound allows {allowed:.2f}x)": [
            None,
            speedup >= 1.6,
            None,
        ],
        "Redis hop p99 under 5 ms": [None, hop < 5.0, None],
        f"worker CPU at most {CPU_TARGET_MS:g} ms/turn": [
            p["cpu_ms_per_turn"]["workers"] <= CPU_TARGET_MS for p in phases
        ],
    }
    _print(turns, paced, at_once, cores, phases, speedup, targets)
    found = {"speedup": speedup, "cores": cores, "targets": targets, **results}
    if against is not None:
        mine = dict(zip(WORKER_COUNTS, phases, strict=True))
        other = {n: theirs[f"{n}_worker"] for n in WORKER_COUNTS}
        table(
            f"W3: this tree against {against.label}, in the same run (workers' CPU target:"
            f" at most {WORKER_CPU_OVER_REV:g}x {against.label}'s)",
            ["", "this tree", against.label, "no-SDK floor", "this/floor", "this/REV", "target"],
            w3_comparison(mine, other),
        )
        found["against"] = {
            "rev": against.label,
            "targets": {
                f"{n} worker(s): CPU at most {WORKER_CPU_OVER_REV:g}x REV's": w3_cpu_target(
                    mine[n], other[n]
                )
                for n in WORKER_COUNTS
            },
            **theirs,
        }
    return found


def w3_cpu_target(mine: dict[str, Any], theirs: dict[str, Any]) -> bool | None:
    """Whether this tree's workers spent at most 1.5x REV's CPU per turn in a phase."""
    return within(
        mine["cpu_ms_per_turn"]["workers"],
        theirs["cpu_ms_per_turn"]["workers"],
        WORKER_CPU_OVER_REV,
    )


# The figures W3 sets side by side with REV's, a row each (printed, not judged), after the
# workers' CPU: how to find each in a phase's figures.
_AGAINST_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], float]], ...] = (
    ("turns/s per worker", lambda p: p["turns_per_s"] / p["workers"]),
    ("one at a time: first text p50 ms", lambda p: p["paced"]["first_text_p50_ms"]),
    ("one at a time: first text p95 ms", lambda p: p["paced"]["first_text_p95_ms"]),
    ("saturated: first text p50 ms", lambda p: p["first_text_p50_ms"]),
    ("saturated: first text p95 ms", lambda p: p["first_text_p95_ms"]),
    # Properties of the ports, one message at a time (no batching by load).
    (
        "one at a time: Redis round trips/turn, workers",
        lambda p: p["paced"]["redis"]["round_trips_per_turn"],
    ),
    (
        "one at a time: Redis commands/turn, server",
        lambda p: p["paced"]["redis"]["server_commands_per_turn"],
    ),
    ("one at a time: SQL statements/turn", lambda p: p["paced"]["database"]["statements_per_turn"]),
    (
        "one at a time: SQL transactions/turn",
        lambda p: p["paced"]["database"]["transactions_per_turn"],
    ),
)


def w3_comparison(
    mine: dict[int, dict[str, Any]], theirs: dict[int, dict[str, Any]]
) -> list[list[Any]]:
    """The rows of W3's table against REV, by worker count: the workers' CPU per turn (this
    tree, REV, the no-SDK floor measured just before, the ratios, the target's verdict),
    then the figures that are printed without a target (the ports' counts one at a time)."""
    rows: list[list[Any]] = []
    for count, phase in mine.items():
        other = theirs[count]
        cpu, rev_cpu = phase["cpu_ms_per_turn"]["workers"], other["cpu_ms_per_turn"]["workers"]
        floor = phase["yardstick_cpu_ms"]
        rows.append(
            [
                f"{count} worker(s): worker CPU ms/turn",
                cpu,
                rev_cpu,
                floor,
                shown_ratio(cpu, floor),
                shown_ratio(cpu, rev_cpu),
                shown_verdict(w3_cpu_target(phase, other)),
            ]
        )
        for name, pick in _AGAINST_ROWS:
            value, rev_value = pick(phase), pick(other)
            rows.append([f"  {name}", value, rev_value, "", "", shown_ratio(value, rev_value), ""])
    return rows


def _bound(workers: int, cores: int, cpu_ms: dict[str, float]) -> float:
    """The most turns/s these CPU costs allow: each worker uses one core at most, and every
    process of the run (redis-server, the fake LLM, the driver) shares the machine's cores."""
    own = workers * 1000 / cpu_ms["workers"] if cpu_ms["workers"] else float("inf")
    total = sum(cpu_ms.values())
    shared = cores * 1000 / total if total else float("inf")
    return min(own, shared)


def _print(
    turns: int,
    paced: int,
    at_once: int,
    cores: int,
    phases: list[dict[str, Any]],
    speedup: float,
    targets: dict[str, list[bool | None]],
) -> None:
    def row(name: str, pick: Callable[[dict[str, Any]], Any]) -> list[Any]:
        return [name, *(pick(p) for p in phases)]

    rows: list[list[Any]] = [
        row(f"turns/s ({at_once} conversations at once)", lambda p: p["turns_per_s"]),
        row(f"  CPU bound on {cores} cores at these costs", lambda p: p["cpu_bound_turns_per_s"]),
        row("turns/s per worker", lambda p: p["turns_per_s"] / p["workers"]),
        row("turn p50 ms (gateway to final answer)", lambda p: p["turn_p50_ms"]),
        row("saturated: first text p50 / p95 ms", lambda p: _first_text(p)),
        row("one at a time: first text p50 / p95 ms", lambda p: _first_text(p["paced"])),
        row("saturated: enqueue -> pick-up p50 / p99 ms", lambda p: _pair(p, "pickup")),
        row("saturated: reply -> outbound p50 / p99 ms", lambda p: _pair(p, "outbound")),
    ]
    for name in phases[0]["cpu_ms_per_turn"]:
        rows.append([f"CPU ms/turn, {name}", *(p["cpu_ms_per_turn"][name] for p in phases)])
    rows += [
        row("yardstick: W1's no-SDK floor, CPU ms/turn, just before", _yardstick),
        row(
            "CPU/turn, workers / yardstick",
            lambda p: f"{p['cpu_ms_per_turn']['workers'] / _yardstick(p):.2f}x",
        ),
    ]
    rows += [
        row(
            "Redis round trips/turn, workers (periodic work aside)",
            lambda p: p["redis"]["round_trips_per_turn"],
        ),
        row("Redis commands sent/turn, workers", lambda p: p["redis"]["commands_per_turn"]),
        row(
            "Redis commands run/turn, server (all clients)",
            lambda p: p["redis"]["server_commands_per_turn"],
        ),
        row(
            f"PostgreSQL statements/turn (server), {at_once} at once",
            lambda p: p["database"]["statements_per_turn"],
        ),
        row(
            f"PostgreSQL transactions/turn (server), {at_once} at once",
            lambda p: p["database"]["transactions_per_turn"],
        ),
        row(
            "  of them rolled back (the pool's pre-ping at each checkout)",
            lambda p: p["database"]["rollbacks_per_turn"],
        ),
        row(
            "one at a time: PostgreSQL statements/turn",
            lambda p: p["paced"]["database"]["statements_per_turn"],
        ),
        row(
            "one at a time: PostgreSQL transactions/turn",
            lambda p: p["paced"]["database"]["transactions_per_turn"],
        ),
        row(
            "one at a time: Redis commands run/turn, server (all clients)",
            lambda p: p["paced"]["redis"]["server_commands_per_turn"],
        ),
        row(
            "whole phase: transactions, pg_stat_database / COMMIT+ROLLBACK",
            lambda p: (
                f"{p['whole_database']['pg_stat_database_transactions']:,}"
                f" / {p['whole_database']['commit_rollback_statements']:,}"
            ),
        ),
        row("one at a time: enqueue -> pick-up p50 / p99", lambda p: _pair(p["paced"], "pickup")),
        row("one at a time: reply -> outbound p50 / p99", lambda p: _pair(p["paced"], "outbound")),
        row(
            "one at a time: round trips/turn, workers (periodic work aside)",
            # Three places: one round trip more in 300 turns shows, as the verdict sees it.
            lambda p: f"{p['paced']['redis']['round_trips_per_turn']:.3f}",
        ),
        row(
            "one at a time: periodic round trips (heartbeat, sweep, idle looks) per s, per worker",
            lambda p: p["paced"]["redis"]["periodic_round_trips_per_s_per_worker"],
        ),
    ]
    rows.append(["2 workers / 1 worker (turns/s)", "", f"{speedup:.2f}x", ""])
    for name, judged in targets.items():
        rows.append([f"target: {name}", *("" if met is None else verdict(met) for met in judged)])
    title = (
        f"W3: Redis mailboxes, PostgreSQL records, {turns} turns (+{paced} one at a time),"
        " 0 ms model"
    )
    table(title, ["", *(f"{n} worker(s)" for n in WORKER_COUNTS)], rows)
    per_command = Counter[str]()
    for name, count in phases[0]["redis"]["commands_by_name"].items():
        per_command[name] = count
    table(
        "W3, 1 worker: the commands it sent per turn (EVALSHA: one script)",
        ["command", "per turn"],
        [[name, count] for name, count in per_command.most_common()],
    )
    kinds = [p["paced"]["database"]["statements_by_kind"] for p in phases]
    table(
        "W3, one at a time: PostgreSQL statements per turn by kind (transactions aside)",
        ["statement", *(f"{n} worker(s)" for n in WORKER_COUNTS)],
        [[name, *(k.get(name, 0.0) for k in kinds)] for name in kinds[0]],
    )


def _yardstick(phase: dict[str, Any]) -> float:
    found: float = phase["yardstick_cpu_ms"]
    return found


def _first_text(figures: dict[str, Any]) -> str:
    return f"{figures['first_text_p50_ms']:.2f} / {figures['first_text_p95_ms']:.2f}"


def _pair(figures: dict[str, Any], key: str) -> str:
    return f"{figures[f'{key}_p50_ms']:.2f} / {figures[f'{key}_p99_ms']:.2f}"


def _phase(
    url: str,
    server: Any,
    workers: int,
    turns: int,
    paced: int,
    at_once: int,
    tree: Tree = THIS_TREE,
) -> dict[str, Any]:
    """One phase: `workers` worker processes of `tree` on a fresh Redis and database."""
    from tests.redis_server import RedisServer

    db_url = asyncio.run(server.new_database())
    db_name = db_url.rsplit("/", 1)[1]
    whole: dict[str, int] = {}
    with ExitStack() as stack:
        # Run last, once the workers have exited: their connections' counts are all in.
        stack.callback(lambda: whole.update(asyncio.run(database.whole_database(server, db_name))))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="switchboard-w3-")))
        try:
            redis = RedisServer(work / "redis")
            redis.start()
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        stack.callback(redis.stop)
        env = tree.env(provider_env("openai", url, work / "data"))
        env["REDIS_URL"] = redis.url
        env["DATABASE_URL"] = database.plain_url(db_url)
        env["SWITCHBOARD_PROFILES_DIR"] = str(bench_profile(work / "profiles", tree.root))
        counts = [work / f"worker-{index}.counts.json" for index in range(workers)]
        pids = [
            stack.enter_context(
                _worker(env, work / f"worker-{index}.log", counts[index], at_once, tree.root)
            )
            for index in range(workers)
        ]
        redis_pids = [redis.process.pid] if redis.process else []
        assert server.process is not None
        postmaster = server.process.pid
        processes: dict[str, Callable[[], float]] = {
            "workers": lambda: sum(map(cpu_seconds, pids)),
            "redis-server": lambda: sum(map(cpu_seconds, redis_pids)),
            "postgres (every process)": lambda: database.tree_cpu_seconds(postmaster),
            "fake LLM": lambda: cpu_seconds(FAKE_PIDS[url]),
        }
        readings: list[dict[str, Any]] = []

        async def reading() -> None:
            # The workers finish a turn's last steps (its processed mark, the mailbox) after
            # the answer went out: let them land.
            await asyncio.sleep(0.3)
            taken: dict[str, Any] = {name: cpu() for name, cpu in processes.items()}
            taken["driver (gateway)"] = time.process_time()
            taken["at"] = time.monotonic()
            taken["counts"] = [
                await ask_counts(pid, path) for pid, path in zip(pids, counts, strict=True)
            ]
            taken["server"] = await _server_commands(redis.url)
            taken["db"] = await database.statement_counts(server, db_name)
            readings.append(taken)

        # A revision from before one queue per session takes its messages off the bus.
        queue = not (tree.root / "core" / "mailbox" / "intake.py").exists()
        figures = asyncio.run(_drive(redis.url, turns, paced, at_once, reading, queue))
        before, after, paced_end = readings
        done = figures["turns"]
        figures["cpu_ms_per_turn"] = {
            name: (after[name] - before[name]) * 1000 / done
            for name in after
            if name not in ("counts", "server", "at", "db")
        }
        figures["redis"] = _redis_figures(before, after, done)
        figures["paced"]["redis"] = _redis_figures(after, paced_end, figures["paced_turns"])
        figures["database"] = database.figures(before["db"], after["db"], done)
        figures["paced"]["database"] = database.figures(
            after["db"], paced_end["db"], figures["paced_turns"]
        )
    figures["whole_database"] = whole
    figures["workers"] = workers
    return figures


# What the bench's people may do: write to the bot in a DM without pairing (their approval is
# still looked up per message), under rate limits and budgets they never reach, so each turn
# reads what a turn of a real deployment reads.
BENCH_PROFILE = """
[access.telegram]
dm_policy = "open"

[limits]
rate_limit = "1000/minute"
chat_rate_limit = "1000/minute"
daily_turns = 100000

[budgets]
global_daily = 1000.0
per_user_daily = 100.0
per_chat_daily = 100.0
per_session = 100.0
"""


def bench_profile(folder: Path, tree: Path = ROOT) -> Path:
    """A profiles folder whose `default` is `tree`'s shipped one plus `BENCH_PROFILE`."""
    target = folder / "default"
    shutil.copytree(tree / "profiles" / "default", target)
    with (target / "profile.toml").open("a") as f:
        f.write(BENCH_PROFILE)
    return folder


def _redis_figures(before: dict[str, Any], after: dict[str, Any], turns: int) -> dict[str, Any]:
    def total(name: str) -> int:
        return int(
            sum(c.get(name, 0) for c in after["counts"])
            - sum(c.get(name, 0) for c in before["counts"])
        )

    # A turn's round trips are what the window took less the process's periodic work (the
    # heartbeat, the sweep, the look for expired leases after a wait that brought nothing),
    # which comes with time, not turns: counted on its own.
    periodic = total("periodic_round_trips")
    trips = total("round_trips") - periodic
    seconds = after["at"] - before["at"]
    by_name: Counter[str] = Counter()
    for c in after["counts"]:
        by_name.update(c["commands"])
    for c in before["counts"]:
        by_name.subtract(c["commands"])
    sites: Counter[str] = Counter()
    for c in after["counts"]:
        sites.update(c.get("sites", {}))
    for c in before["counts"]:
        sites.subtract(c.get("sites", {}))
    server = Counter(after["server"])
    server.subtract(before["server"])
    return {
        "round_trips_per_turn": trips / turns,
        "periodic_round_trips": periodic,
        "periodic_round_trips_per_s_per_worker": periodic / seconds / len(after["counts"]),
        "commands_per_turn": sum(by_name.values()) / turns,
        "commands_by_name": {
            name: round(count / turns, 2) for name, count in by_name.most_common() if count > 0
        },
        "round_trips_by_site": {
            name: round(count / turns, 2) for name, count in sites.most_common() if count > 0
        },
        "server_commands_per_turn": sum(server.values()) / turns,
        "server_commands_by_name": {
            name: round(count / turns, 2) for name, count in server.most_common() if count > 0
        },
    }


async def _server_commands(url: str) -> dict[str, int]:
    """redis-server's count of calls per command so far (scripts' inner commands included;
    the INFO asking for it is left out)."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name not in ("cmdstat_info", "cmdstat_hello", "cmdstat_client|setinfo")
    }


@contextmanager
def _worker(
    env: dict[str, str], log: Path, counts: Path, concurrency: int, tree: Path = ROOT
) -> Iterator[int]:
    """A `switchboard worker` of `tree` under `tree`'s own `bench.probe`."""
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.probe",
                "worker",
                "--concurrency",
                str(concurrency),
            ],
            cwd=tree,
            env={**env, COUNTS_ENV: str(counts)},
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
    redis_url: str,
    turns: int,
    paced: int,
    at_once: int,
    reading: Callable[[], Awaitable[None]],
    inbound_queue: bool = False,
) -> dict[str, Any]:
    """Warm up; run `turns` turns, `at_once` conversations at a time (`reading` is called just
    before and after, for CPU, Redis and database accounting); then `paced` turns one at a
    time, where no turn waits for another and the hops are the queue path's alone (`reading`
    again at its end).
    The one-at-a-time conversations take turns, so a conversation's next message does not come
    while its last turn still ends (its final writes after the answer), which with several
    workers would hand it from one to another: a person takes seconds to write again."""
    from bench.driver import ChatDriver
    from core.backends.redis.bus import RedisBus
    from core.backends.redis.mailboxes import RedisMailboxes

    bus = await RedisBus.connect(redis_url)
    mailboxes = RedisMailboxes.from_url(redis_url)
    conversations = max(at_once, turns // TURNS_PER_CONVERSATION)
    try:
        async with ChatDriver(bus, mailboxes, inbound_queue=inbound_queue) as driver:
            # Warm-up, not measured: workers started and connected, code paths loaded.
            await driver.conversations(at_once, 1, first=conversations)
            driver.measuring = True
            await reading()
            started = time.perf_counter()
            await driver.conversations(conversations, TURNS_PER_CONVERSATION, at_once=at_once)
            wall = time.perf_counter() - started
            await reading()
            figures = driver.figures()
        paced_conversations = max(1, paced // TURNS_PER_CONVERSATION)
        async with ChatDriver(bus, mailboxes, inbound_queue=inbound_queue) as one_by_one:
            one_by_one.measuring = True
            await one_by_one.in_turn(
                paced_conversations, TURNS_PER_CONVERSATION, first=2 * conversations
            )
            await reading()
    finally:
        await bus.close()
        await mailboxes.aclose()
    done = conversations * TURNS_PER_CONVERSATION
    return {
        "turns": done,
        "conversations": conversations,
        "at_once": at_once,
        "worker_concurrency": at_once,
        "wall_s": wall,
        "turns_per_s": done / wall,
        **figures,
        "paced_turns": paced_conversations * TURNS_PER_CONVERSATION,
        "paced": one_by_one.figures(),
    }
