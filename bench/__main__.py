"""`python -m bench [WORKLOAD ...]`: run workloads, print their tables, save their JSON."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from bench.against import DEFAULT_REV, Tree, checkout
from bench.common import RESULTS, BenchError, save
from bench.report import console

WORKLOADS = ("w1", "w2", "w3", "w4")
# Run only when named: not workloads of `all`.
EXTRAS = ("faults", "startup", "records", "transactions", "statements", "memory", "images")
# The workloads that also measure another revision in the same run (`--against`).
COMPARED = ("w1", "w3")


def _runner(
    name: str, quick: bool, chats: int | None = None, against: Tree | None = None
) -> Callable[[], dict[str, Any]]:
    if name == "w1":
        from bench.turns import w1

        return lambda: w1(turns=40 if quick else 200, repeats=1 if quick else 3, against=against)
    if name == "transactions":
        from bench.transactions import transactions

        return lambda: transactions(turns=20 if quick else 100)
    if name == "statements":
        from bench.statements import statements

        return lambda: statements(calls=500 if quick else 2000)
    if name == "memory":
        from bench.memory import memory

        return memory
    if name == "images":
        from bench.images import images

        return images
    if name == "startup":
        from bench.startup import startup

        return lambda: startup(runs=3 if quick else 10)
    if name == "w2":
        from bench.turns import w2

        return lambda: w2(scale=0.2 if quick else 1.0)
    if name == "w3":
        from bench.distributed import w3

        return lambda: w3(
            turns=300 if quick else 2000,
            paced=100 if quick else 300,
            memory_messages=1000 if quick else 10_000,
            against=against,
        )
    if name == "records":
        from bench.records import records

        return lambda: records(chats=chats or (10 if quick else 50))
    if name == "faults":
        from bench.faults import faults

        return lambda: faults(chats=chats or (10 if quick else 50))
    from bench.soak import w4

    return lambda: w4(messages=1000 if quick else 10_000)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("workloads", nargs=-1, type=click.Choice([*WORKLOADS, *EXTRAS, "all"]))
@click.option("--quick", is_flag=True, help="Smaller runs, for trying the harness out.")
@click.option(
    "--chats",
    type=click.IntRange(1, 500),
    help="faults, records: chats sending 4 messages (default 50).",
)
@click.option(
    "--against",
    metavar="REV",
    default=DEFAULT_REV,
    show_default=True,
    help="w1, w3: also run the product of this git revision (a temporary worktree).",
)
@click.option("--alone", is_flag=True, help="w1, w3: measure this tree only, no --against.")
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=RESULTS,
    show_default=True,
    help="Folder for the JSON files.",
)
def main(
    workloads: tuple[str, ...],
    quick: bool,
    chats: int | None,
    against: str,
    alone: bool,
    results: Path,
) -> None:
    """Run Switchboard's benchmark workloads (all of them by default).

    \b
    w1  one session, 200 turns, our runtime vs the floor loop (OpenAI and Anthropic)
    w2  50 sessions x 20 turns at once; 1,000 sessions x 1 turn at 200 ms model latency
    w3  distributed: the Redis mailboxes, 1, 2 and 4 `switchboard worker` processes,
        records in PostgreSQL; then Redis's memory over 10,000 messages
    w4  soak: 10,000 messages through the worker path (embedded and Redis), memory sampled
    faults  the fault matrix (not part of `all`): each fault under 50 chats x 4 messages
    startup  `switchboard --help` and `switchboard chat` start-up times (only when named)
    transactions  SQL transactions per turn through the InboundHandler (only when named)
    statements  the CPU of one SQL statement and one transaction on SQLite: sqlite3 against
                SQLAlchemy Core, built once or on each call (only when named)
    records  50 chats x 4 messages on PostgreSQL + Redis, Redis emptied and restarted, one
             more message each: on one server and on a cluster (only when named)
    memory  recall at 5 of keyword against hybrid memory search on a labelled set, with
            fake embeddings: it measures the fusion, not a model (only when named)
    images  request and stored-row sizes of a conversation with one 300 KB photo (only
            when named)

    w1 and w3 also run the product of another revision (--against, default the commit
    before the flow issue's work) from a temporary git worktree, in the same run, and print
    a table of this tree, that revision, the floor and the ratios (--alone: not).

    Each prints a table and writes JSON to bench/results/. The fake LLM, Redis and the
    workers run on 127.0.0.1 in processes of their own; see docs/performance.md.
    """
    chosen = WORKLOADS if not workloads or "all" in workloads else workloads
    compare = not alone and any(name in COMPARED for name in chosen)
    with ExitStack() as stack:
        tree: Tree | None = None
        try:
            if compare:
                tree = stack.enter_context(checkout(against))
        except BenchError as exc:
            console.print(f"[red]bench could not start:[/red] {exc}")
            sys.exit(1)
        for name in chosen:
            _run(name, quick, chats, tree if name in COMPARED else None, results)


def _run(name: str, quick: bool, chats: int | None, tree: Tree | None, results: Path) -> None:
    """One workload: run, print, save; a BenchError is one line and exit 1."""
    started = time.monotonic()
    try:
        figures = _runner(name, quick, chats, tree)()
    except BenchError as exc:
        console.print(f"[red]{name} could not run:[/red] {exc}")
        sys.exit(1)
    except KeyboardInterrupt:
        console.print(f"{name} interrupted; nothing saved")
        sys.exit(130)
    path = save(name + ("-quick" if quick else ""), figures, results)
    console.print(f"{name} took {time.monotonic() - started:.0f} s; figures in {path}\n")


if __name__ == "__main__":
    main()
