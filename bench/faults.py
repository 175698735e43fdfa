"""The fault matrix: each fault the issue names, under load, against the real processes.

Each row gets a fresh `redis-server` and PostgreSQL (DATABASE_URL: the records), or for the
embedded row a SQLite file, the Telegram Bot API fake and the OpenAI fake (in this process), a
gateway and two `switchboard worker`s (or one `switchboard serve`).
Every chat sends all its messages at once; the model answers "answer to <text>" after the
model latency; the fault comes `fault_at` seconds in. The harness is the end-to-end tests'
(`tests/e2e/faults.py`): only the load is bigger here, and nothing is asserted.

Columns: sent; answered (at least once); duplicated (answers shown more than once); lost
(never shown); recover s (from the fault to the first answer completed after it was over);
caught up s (from the fault to the last answer); total s (from sending to the last answer).
"-" when no answer was left to give after the fault. A row's notes say what Redis held when it
was emptied (FLUSHALL), and any message or answer PostgreSQL stored twice.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.common import BenchError
from bench.report import console, table

# The platform fakes need no key; the OpenAI fake checks this one.
_API_KEY = "bench-key"


def faults(
    *,
    chats: int = 50,
    per_chat: int = 4,
    latency: float = 0.8,
    fault_at: float = 4.0,
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run every fault (or `only` those) and print the matrix; the rows as figures."""
    from tests.e2e.faults import FAULTS

    chosen = only or FAULTS
    unknown = [f for f in chosen if f not in FAULTS]
    if unknown:
        raise BenchError(f"unknown fault {unknown[0]!r}; known: {', '.join(FAULTS)}")
    # The Telegram library in the gateways reads this (tests/fakes/fixtures.py says why).
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    rows = asyncio.run(_all(chosen, chats, per_chat, latency, fault_at))
    title = (
        f"Fault matrix: {chats} chats x {per_chat} messages, model latency {latency:g} s, "
        f"fault {fault_at:g} s in"
    )
    columns = [
        "fault",
        "sent",
        "answered",
        "duplicated",
        "lost",
        "recover s",
        "caught up s",
        "total s",
    ]
    table(
        title,
        columns,
        [
            [
                r["description"],
                r["sent"],
                r["answered"],
                r["duplicated"],
                r["lost"],
                _seconds(r["recover_seconds"]),
                _seconds(r["caught_up_seconds"]),
                f"{r['total_seconds']:.1f}",
            ]
            for r in rows
        ],
    )
    for r in rows:
        for note in r["notes"]:
            console.print(f"{r['fault']}: {note}")
    return {
        "load": {"chats": chats, "per_chat": per_chat, "latency": latency, "fault_at": fault_at},
        "rows": rows,
    }


async def _all(
    chosen: tuple[str, ...], chats: int, per_chat: int, latency: float, fault_at: float
) -> list[dict[str, Any]]:
    from tests.e2e.faults import Load, run_fault
    from tests.fakes import FakeOpenAI, FakeTelegram

    rows = []
    with tempfile.TemporaryDirectory(prefix="switchboard-faults-") as folder:
        for fault in chosen:
            console.print(f"fault matrix: {fault} ...")
            # Two workers of 8 turns at once each (the profile's default, which the embedded
            # `serve` uses alone): the load lasts long enough for the fault to cut into it.
            load = Load(
                chats=chats,
                per_chat=per_chat,
                latency=latency,
                fault_after_seconds=fault_at,
                concurrency=8,
                answer_within=120.0 + 2 * chats * per_chat * latency / max(1, chats),
            )
            async with FakeTelegram() as fake, FakeOpenAI(api_key=_API_KEY) as model:
                try:
                    row = await run_fault(fault, load, Path(folder) / fault, fake, model)
                except AssertionError as exc:
                    first = str(exc).strip().splitlines()[0]
                    # The processes' logs, kept for the post-mortem (the folder goes away).
                    kept = Path(tempfile.gettempdir()) / f"switchboard-faults-{fault}.log"
                    kept.write_text(str(exc))
                    raise BenchError(f"{fault} did not finish: {first} (logs: {kept})") from None
            console.print(f"  {row}")
            rows.append(
                {
                    "fault": row.fault,
                    "description": row.description,
                    "sent": row.sent,
                    "answered": row.answered,
                    "duplicated": row.duplicated,
                    "lost": row.lost,
                    "recover_seconds": row.recover_seconds,
                    "caught_up_seconds": row.caught_up_seconds,
                    "total_seconds": row.total_seconds,
                    "notes": row.notes,
                }
            )
    return rows


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
