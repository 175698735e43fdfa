"""The records acceptance under its full load: 50 chats x 4 messages through a gateway and two
`switchboard worker`s, records in PostgreSQL; then Redis emptied (`FLUSHALL`) and restarted
under the running processes, and each chat's fifth message answered with its history. Once on
one redis-server, once on a 3-node Redis Cluster.

The scenario (and every check it makes: answers, histories, `switchboard pairing list` and
`switchboard cost --by day` the same after the flush) is the end-to-end tests'
(`tests/e2e/records.py`); only the load is bigger here. A check that fails is reported as the
row's error. Each row gets its own redis-server or cluster, its own PostgreSQL, and the
Telegram Bot API and OpenAI fakes in this process.

Columns: sent; answered (each expected answer shown); doubled (answers shown more than once);
lost (expected and never shown); load s (the first four messages of every chat); after restart
s (the fifth message of every chat, on the emptied Redis); turns/s over the load.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BenchError
from bench.report import console, table

# The OpenAI fake checks this key.
_API_KEY = "bench-key"
# How long one answer may take: turns of many chats queue up behind two workers.
_WITHIN = 120.0


def records(*, chats: int = 50) -> dict[str, Any]:
    """Run the scenario on one server and on a cluster; print the rows; return them."""
    # The Telegram library in the gateway reads this (tests/fakes/fixtures.py says why).
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    rows = asyncio.run(_both(chats))
    from tests.e2e.records import MESSAGES

    table(
        f"Records acceptance: {chats} chats x {MESSAGES} messages, Redis emptied and "
        "restarted, 1 more each",
        ["redis", "sent", "answered", "doubled", "lost", "load s", "after restart s", "turns/s"],
        [
            [
                r["redis"],
                r["sent"],
                r["answered"],
                r["doubled"],
                r["lost"],
                f"{r['load_seconds']:.1f}",
                f"{r['after_restart_seconds']:.1f}",
                f"{chats * MESSAGES / r['load_seconds']:.1f}",
            ]
            for r in rows
        ],
    )
    return {"load": {"chats": chats, "per_chat": MESSAGES + 1}, "rows": rows}


async def _both(chats: int) -> list[dict[str, Any]]:
    from tests.postgres_server import PostgresServer
    from tests.redis_server import RedisClusterServers, RedisServer

    rows = []
    with tempfile.TemporaryDirectory(prefix="switchboard-records-") as folder:
        postgres = PostgresServer()
        postgres.start()
        try:
            for kind in ("server", "cluster"):
                redis: RedisServer | RedisClusterServers = (
                    RedisServer(Path(folder) / "redis")
                    if kind == "server"
                    else RedisClusterServers(Path(folder) / "cluster")
                )
                redis.start()
                try:
                    console.print(f"records on a Redis {kind} ...")
                    row = await _row(
                        kind, redis.url, redis.restart, await postgres.new_database(), chats, folder
                    )
                finally:
                    redis.stop()
                console.print(f"  {row}")
                rows.append(row)
        finally:
            postgres.stop()
    return rows


async def _row(
    kind: str,
    url: str,
    restart: Callable[[], None],
    postgres_url: str,
    chats: int,
    folder: str,
) -> dict[str, Any]:
    from tests.e2e.records import run_acceptance
    from tests.fakes import FakeOpenAI, FakeTelegram

    workdir = Path(folder) / f"{kind}-deployment"
    workdir.mkdir()
    async with FakeTelegram() as fake, FakeOpenAI(api_key=_API_KEY) as model:
        try:
            outcome = await run_acceptance(
                url, restart, postgres_url, fake, model, workdir, chats=chats, within=_WITHIN
            )
        except AssertionError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "a check failed"
            kept = Path(tempfile.gettempdir()) / f"switchboard-records-{kind}.log"
            kept.write_text(str(exc))
            raise BenchError(f"records on a Redis {kind}: {first} (logs: {kept})") from None
    return {"redis": kind, **vars(outcome)}
