"""Faults of the distributed deployment's two servers while messages flow: PostgreSQL, where
the records are (DATABASE_URL), restarted; Redis, which only coordinates, emptied.

A gateway, two workers and a scheduler run against a PostgreSQL and a `redis-server` the test
starts, the Telegram fake and the OpenAI fake (which answers "answer to <text>").

- PostgreSQL stopped at once (an immediate shutdown: its processes exit as in a crash) and
  started again on its port and data folder: the turns it caught wait for it and go on;
  every message is answered once, stored once and paid for once; `/readyz` of every process
  says not ready while it is down and ready after, and every process (none restarted) works
  after it.
- Redis emptied (`FLUSHALL`, and `FLUSHALL` then a restart): no record is lost (they are in
  PostgreSQL) and nothing is answered or stored twice. What Redis held at that moment (the
  messages queued and not yet taken, the answers queued and not yet shown) is lost; the test
  prints how many, for docs/deploy.md's fault matrix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.faults import redis_holds, stored_texts, twice
from tests.e2e.processes import Deployment, Launched, clean_env, run_once, until
from tests.e2e.test_distributed import answers, redis_client, settled
from tests.e2e.test_redis_faults import (
    TOKEN,
    Tally,
    apologies,
    counting,
    merged,
    model_calls,
    send,
    start_deployment,
    stop_all,
    tally,
    until_answered,
)
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer, free_port

pytestmark = pytest.mark.e2e

LATENCY = 0.3
FIRST_CHAT = 4001
PROCESSES = ("gateway", "worker0", "worker1", "scheduler")


@pytest.fixture
async def restartable_postgres() -> AsyncIterator[PostgresServer]:
    """A PostgreSQL of the test's own (it is stopped and started); every commit it
    acknowledged survives an immediate shutdown."""
    server = PostgresServer(crash_safe=True)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def readiness(
    http: aiohttp.ClientSession, ports: dict[str, str]
) -> Callable[[int], Callable[[], Awaitable[bool]]]:
    """`all_are(status)`: a check that every process's `/readyz` answers `status`."""

    async def statuses() -> set[int]:
        found = set()
        for port in ports.values():
            url = f"http://127.0.0.1:{port}/readyz"
            async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
                found.add(response.status)
        return found

    def all_are(status: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await statuses() == {status}

        return check

    return all_are


async def until_each_worker_answers(
    fake: FakeTelegram, deployment: Deployment, workers: list[Launched], first_chat: int
) -> dict[int, list[str]]:
    """New chats write one message at a time until each worker has completed a turn since
    now: no worker went deaf. The messages sent and their answers."""
    offsets = [len(w.log) for w in workers]
    sent: dict[int, list[str]] = {}
    for chat in range(first_chat, first_chat + 20):
        sent.update(send(fake, [chat], "late"))
        await deployment.ready(until_answered(fake, sent, 30), timeout=35)
        if all("turn completed" in w.log[o:] for w, o in zip(workers, offsets, strict=True)):
            return sent
    raise AssertionError(f"a worker took no turn after the fault\n{deployment.describe()}")


@pytest.mark.timeout(180)
async def test_postgres_restarted_mid_load_answers_and_stores_every_message_once(
    redis_url: str,
    restartable_postgres: PostgresServer,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    in_flight, count = counting(after=4)
    fake_openai.script(*answers(LATENCY, count))
    database = await restartable_postgres.new_database()
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    env["DATABASE_URL"] = database
    ports = {name: str(free_port()) for name in PROCESSES}
    async with (
        Deployment(env, tmp_path) as deployment,
        redis_client(redis_url) as client,
        aiohttp.ClientSession() as http,
    ):
        processes = await start_deployment(deployment, fake, **ports)
        all_are = readiness(http, ports)
        await until(all_are(200), 20, "ready", deployment.describe)
        chats = list(range(FIRST_CHAT, FIRST_CHAT + 8))
        load = merged(send(fake, chats, "first"), send(fake, chats, "second"))
        await deployment.ready(in_flight.wait())

        # Stopped as in a crash while turns are mid-answer: what they write next fails.
        await asyncio.to_thread(restartable_postgres.halt, immediate=True)
        await until(all_are(503), 20, "not ready while PostgreSQL is down", deployment.describe)
        unhealthy = await run_once(["health"], env, tmp_path)
        assert unhealthy.returncode == 1, unhealthy
        assert "Traceback" not in unhealthy.stderr, unhealthy
        await asyncio.to_thread(restartable_postgres.start)
        await until(all_are(200), 30, "ready again", deployment.describe)

        await deployment.ready(until_answered(fake, load, 60), timeout=65)
        await until(settled(client), 30, "work settled", deployment.describe)
        workers = [processes["worker0"], processes["worker1"]]
        late = await until_each_worker_answers(fake, deployment, workers, FIRST_CHAT + 100)
        await until(settled(client), 30, "work settled", deployment.describe)
        everything = merged(load, late)
        result = tally(fake, everything)
        assert (result.duplicated, result.lost) == (0, 0), f"{result}\n{deployment.describe()}"
        # The turns the restart caught waited for the database: none apologized, none asked
        # the model twice.
        assert apologies(fake, everything) == [], deployment.describe()
        calls = model_calls(fake_openai)
        assert calls == result.sent, deployment.describe()
        assert all(p.returncode is None for p in processes.values()), deployment.describe()
        # The restart caught turns mid-write: they waited for the database (one line each
        # way), without a traceback.
        waited = [w for w in workers if "waiting for the store or the bus" in w.log]
        assert waited, deployment.describe()
        assert all("Traceback" not in p.log for p in processes.values()), deployment.describe()
        await stop_all(processes)

    users, stored_answers, entries = await stored_texts(database)
    wanted = [t.removeprefix("answer to ") for texts in everything.values() for t in texts]
    # Every message and every answer stored once, in spite of the writes the restart cut.
    assert sorted(users) == sorted(wanted), twice(users)
    assert twice(stored_answers) == [], stored_answers
    assert len(stored_answers) == result.sent
    assert entries == calls  # one ledger entry per paid model call
    print(f"PostgreSQL restarted (immediate shutdown) mid-load: {result}")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("restart", [False, True], ids=["flushall", "flushall-and-restart"])
async def test_redis_emptied_mid_load_loses_no_record_and_doubles_nothing(
    postgres_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
    *,
    restart: bool,
) -> None:
    fake = fake_telegram
    in_flight, count = counting(after=6)
    fake_openai.script(*answers(LATENCY, count))
    server = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(server.start)
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    env["DATABASE_URL"] = postgres_url
    try:
        async with Deployment(env, tmp_path) as deployment, redis_client(server.url) as client:
            processes = await start_deployment(deployment, fake)
            chats = list(range(FIRST_CHAT, FIRST_CHAT + 8))
            load = merged(send(fake, chats, "first"), send(fake, chats, "second"))
            await deployment.ready(in_flight.wait())

            held = await redis_holds(client)
            await client.flushall()
            if restart:
                # FLUSHALL is in the append-only file too: Redis comes back empty.
                await asyncio.to_thread(server.stop)
                await asyncio.to_thread(server.start)

            workers = [processes["worker0"], processes["worker1"]]

            async def turns_under_way_finished() -> bool:
                done = sum(w.log.count("turn completed") for w in workers)
                return done == model_calls(fake_openai) and await settled(client)()

            # The turns under way finish; what was queued is gone: nothing is left to take.
            await until(turns_under_way_finished, 30, "turns finished", deployment.describe)
            late = await until_each_worker_answers(fake, deployment, workers, FIRST_CHAT + 100)
            await until(settled(client), 30, "work settled", deployment.describe)
            before: Tally = tally(fake, load)
            after = tally(fake, late)
            # What Redis held may be lost; nothing may come twice, and what comes after works.
            assert before.duplicated == 0, f"{before}\n{deployment.describe()}"
            assert (after.duplicated, after.lost) == (0, 0), f"{after}\n{deployment.describe()}"
            calls = model_calls(fake_openai)
            assert all(p.returncode is None for p in processes.values()), deployment.describe()
            await stop_all(processes)
    finally:
        await asyncio.to_thread(server.stop)

    users, stored_answers, entries = await stored_texts(postgres_url)
    shown = {t for chat in merged(load, late) for t in fake.sent_texts(chat)}
    # Every answer shown is in the conversation log, once; no message is stored twice; every
    # model call is in the cost ledger, once.
    assert shown <= set(stored_answers), (shown, stored_answers)
    assert twice(users) == [], users
    assert twice(stored_answers) == [], stored_answers
    assert entries == calls
    print(
        f"Redis emptied{' and restarted' if restart else ''} mid-load: {before} "
        f"(stored: {len(set(users) & {f'{w} {c}' for c in chats for w in ('first', 'second')})} "
        f"of {before.sent}); after: {after}; Redis held {held}"
    )
