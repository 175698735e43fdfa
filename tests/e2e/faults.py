"""The fault matrix: one load through the real processes, one fault in its middle, a tally.

Shared by the end-to-end tests (`tests/e2e/test_fault_matrix.py`, small loads, asserted) and
`python -m bench faults` (the issue's load, printed). Every fault runs against a fresh
`redis-server` (or, for the embedded deployment, a fresh SQLite file), the Telegram Bot API
fake and the OpenAI fake, which answers "answer to <the user's text>" after the model latency,
so each message's answer is known and counted on the Telegram fake: once is answered, more
is duplicated, never is lost.

The distributed deployment keeps its records in a PostgreSQL of its own (DATABASE_URL), which
the harness starts too; after each of its rows the conversations there are read back, and a
message or an answer stored twice is noted on the row.

Faults (`FAULTS`): none; SIGKILL one of two workers; SIGTERM the gateway and start a new one;
SIGKILL the gateway and start a new one; Redis restarted with its append-only file; Redis
restarted empty; PostgreSQL stopped at once (immediate shutdown) and started again; Redis
emptied with FLUSHALL, and FLUSHALL then a restart; the embedded `switchboard serve`
SIGKILLed and started again.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import redis.asyncio as aioredis

from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from tests.e2e.processes import Deployment, Launched, clean_env, until
from tests.e2e.test_distributed import answers, keys, redis_client, settled
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer

__all__ = ["FAULTS", "Load", "Row", "run_fault", "stored_texts", "twice"]

FAULTS = (
    "none",
    "worker-kill",
    "gateway-term",
    "gateway-kill",
    "redis-aof",
    "redis-empty",
    "postgres-restart",
    "redis-flushall",
    "redis-flushall-restart",
    "serve-kill",
)
DESCRIPTIONS = {
    "none": "none",
    "worker-kill": "SIGKILL one of two workers",
    "gateway-term": "SIGTERM the gateway, a new one started",
    "gateway-kill": "SIGKILL the gateway, a new one started",
    "redis-aof": "Redis restarted, AOF on",
    "redis-empty": "Redis restarted empty (no persistence)",
    "postgres-restart": "PostgreSQL stopped at once and restarted",
    "redis-flushall": "Redis emptied (FLUSHALL)",
    "redis-flushall-restart": "Redis emptied (FLUSHALL) and restarted",
    "serve-kill": "embedded `switchboard serve` SIGKILLed and restarted",
}
# Each process's log line when a loop first fails (Redis stays down until all have said so),
# and when it works again.
NOT_WORKING = r"WARNING core\.readiness: {} is not working"
WORKING = r"{} is working again"
# The loop whose line says each process noticed Redis going away: the gateway's delivery loop,
# or (mid-delivery) the hold on a reply it waits for; the worker's sweep, which looks every 2 s
# whatever its turns do (its wait for wakes pauses while every slot runs a turn). The
# scheduler has none: it reads its
# schedules from the database and touches Redis only to put a due run in its mailbox.
LOOPS = {
    "gateway": "(?:telegram delivery|reply holds)",
    "worker": "worker sweep",
}
# The faults after which what Redis held is gone: the answers the harness waits for may never
# come.
LOSSY = frozenset({"redis-empty", "redis-flushall", "redis-flushall-restart"})
# A worker's log line when its turns (or its loop) first meet the database away.
DATABASE_AWAY = r"waiting for the store or the bus|is not working"
# After the fault, how long nothing may happen before the tally is taken when some answers
# can never come (Redis restarted empty): the answers in flight have had time to arrive.
_QUIET = 3.0
_POLL = 0.05


@dataclass
class Load:
    """What is sent, how fast the model answers, and when the fault comes."""

    chats: int = 10
    per_chat: int = 2
    latency: float = 0.3
    # The fault comes once this many model calls were made (turns are mid-answer) ...
    fault_after_calls: int = 6
    # ... or, when set, this many seconds after the load was sent.
    fault_after_seconds: float | None = None
    concurrency: int = 3
    answer_within: float = 60.0
    first_chat: int = 3001

    def expected(self) -> dict[int, list[str]]:
        """Each chat's messages' answers, in order."""
        return {
            chat: [f"answer to m{chat}-{n}" for n in range(self.per_chat)]
            for chat in range(self.first_chat, self.first_chat + self.chats)
        }


@dataclass
class Row:
    """One fault's outcome: counts from the Telegram fake, times from the harness."""

    fault: str
    sent: int
    answered: int
    duplicated: int
    lost: int
    # From the start of the fault to the first answer completed after it ended.
    recover_seconds: float | None
    # From the start of the fault to the last answer (every message answered).
    caught_up_seconds: float | None
    # From sending the load to the last answer.
    total_seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.fault]

    def __str__(self) -> str:
        recover = "-" if self.recover_seconds is None else f"{self.recover_seconds:.1f}s"
        caught_up = "-" if self.caught_up_seconds is None else f"{self.caught_up_seconds:.1f}s"
        return (
            f"{self.fault}: sent {self.sent}, answered {self.answered}, duplicated "
            f"{self.duplicated}, lost {self.lost}; first answer {recover} after the fault, "
            f"all answered {caught_up} after it"
        )


class _Answers:
    """Watches the Telegram fake: when each expected answer was first complete."""

    def __init__(self, fake: FakeTelegram, expected: dict[int, list[str]]) -> None:
        self.fake = fake
        self.expected = expected
        self.first_seen: dict[tuple[int, str], float] = {}
        self.last_change = 0.0
        self._calls = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.last_change = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._look()

    def complete(self) -> bool:
        return len(self.first_seen) == sum(len(t) for t in self.expected.values())

    def tally(self) -> tuple[int, int, int, int]:
        sent = answered = duplicated = lost = 0
        for chat, wanted in self.expected.items():
            texts = self.fake.sent_texts(chat)
            for text in wanted:
                seen = texts.count(text)
                sent += 1
                answered += seen >= 1
                duplicated += max(0, seen - 1)
                lost += seen == 0
        return sent, answered, duplicated, lost

    def _look(self) -> None:
        now = asyncio.get_running_loop().time()
        if len(self.fake.calls) != self._calls:
            self._calls = len(self.fake.calls)
            self.last_change = now
        for chat, wanted in self.expected.items():
            texts = self.fake.sent_texts(chat)
            for text in wanted:
                if (chat, text) not in self.first_seen and text in texts:
                    self.first_seen[(chat, text)] = now

    async def _watch(self) -> None:
        # The fake lives in this event loop; looking at it is cheap, and edits (the final text
        # of a streamed answer) are no call this harness could await by method alone.
        while True:
            self._look()
            await asyncio.sleep(_POLL)


@dataclass
class _Run:
    """The state one fault's run shares between its steps."""

    load: Load
    fake: FakeTelegram
    watcher: _Answers
    asked: asyncio.Event
    started: float = 0.0
    fault_began: float = 0.0
    fault_ended: float = 0.0
    notes: list[str] = field(default_factory=list)


def _script(fake_openai: FakeOpenAI, load: Load) -> asyncio.Event:
    """The model's answers; the event is set once `fault_after_calls` calls were made."""
    asked = asyncio.Event()
    calls = 0

    def count() -> None:
        nonlocal calls
        calls += 1
        if calls >= load.fault_after_calls:
            asked.set()

    # Every turn may be run twice (a fault cut it off), and a few more.
    steps = answers(load.latency, count)
    fake_openai.script(*(steps * (1 + (2 * load.chats * load.per_chat) // len(steps))))
    return asked


def _send(run: _Run) -> None:
    for n in range(run.load.per_chat):
        for chat in run.load.expected():
            run.fake.private_text(chat, f"m{chat}-{n}")


async def _until_fault_time(run: _Run, deployment: Deployment) -> None:
    loop = asyncio.get_running_loop()
    if run.load.fault_after_seconds is not None:
        left = run.started + run.load.fault_after_seconds - loop.time()
        await asyncio.sleep(max(0.0, left))  # the bench's fault comes at a set time
    else:
        await deployment.ready(run.asked.wait(), timeout=run.load.answer_within)
    run.fault_began = loop.time()


async def _until_done(
    run: _Run, deployment: Deployment, settled_check: Callable[[], Awaitable[bool]], *, lossy: bool
) -> None:
    """Every answer shown and all work settled; when `lossy`, settled and quiet will do."""
    loop = asyncio.get_running_loop()
    deadline = run.started + run.load.answer_within

    async def done() -> bool:
        for p in deployment.processes:
            if p.returncode is not None and not p.signalled:
                raise AssertionError(f"{p.name} exited\n{deployment.describe()}")
        if run.watcher.complete():
            return await settled_check()
        quiet = loop.time() - run.watcher.last_change >= _QUIET
        return lossy and quiet and await settled_check()

    await until(done, max(1.0, deadline - loop.time()), "answers", deployment.describe)
    # Anything doubled shows up here: a repeated delivery has been given time to happen.
    await until(settled_check, 30, "work settled", deployment.describe)


async def run_fault(
    fault: str,
    load: Load,
    workdir: Path,
    fake: FakeTelegram,
    fake_openai: FakeOpenAI,
) -> Row:
    """Run `load` through a fresh deployment with `fault` in its middle; the outcome."""
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    run = _Run(load, fake, _Answers(fake, load.expected()), _script(fake_openai, load))
    if fault == "serve-kill":
        await _embedded(run, workdir, fake_openai)
    else:
        await _distributed(fault, run, workdir, fake_openai)
    sent, answered, duplicated, lost = run.watcher.tally()
    after = [t for t in run.watcher.first_seen.values() if t >= run.fault_ended]
    recover = min(after) - run.fault_began if after else None
    finished = max(run.watcher.first_seen.values(), default=run.started)
    caught_up = finished - run.fault_began if after else None
    return Row(
        fault,
        sent,
        answered,
        duplicated,
        lost,
        recover,
        caught_up,
        finished - run.started,
        run.notes,
    )


async def _distributed(fault: str, run: _Run, workdir: Path, fake_openai: FakeOpenAI) -> None:
    server = RedisServer(workdir / "redis", persistent=fault != "redis-empty")
    database = PostgresServer(crash_safe=True)
    await asyncio.to_thread(server.start)
    env = clean_env(workdir, redis_url=server.url, telegram=run.fake, openai=fake_openai)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.to_thread(database.start)
        env["DATABASE_URL"] = url = await database.new_database()
        async with Deployment(env, workdir) as deployment, redis_client(server.url) as client:
            gateway = await deployment.start("gateway", "telegram")
            workers = [
                await deployment.start("worker", "--concurrency", str(run.load.concurrency))
                for _ in range(2)
            ]
            await deployment.ready(run.fake.wait_idle_poll(timeout=30))
            for worker in workers:
                await worker.until_logged("taking work")
            run.watcher.start()
            run.started = loop.time()
            _send(run)
            await _until_fault_time(run, deployment)
            if fault == "worker-kill":
                workers[0].send_signal(signal.SIGKILL)
            elif fault in ("gateway-term", "gateway-kill"):
                gateway.send_signal(signal.SIGTERM if fault == "gateway-term" else signal.SIGKILL)
                await gateway.wait(timeout=35)
                replacement = await deployment.start("gateway", "telegram")
                # A killed gateway's poller lease lapses first (15 s); a stopped one let go.
                await replacement.until_logged(r"took telegram-poller", 30)
            elif fault in ("redis-aof", "redis-empty"):
                await _restart_redis(server, {"gateway": gateway, "worker": workers[1]})
            elif fault == "postgres-restart":
                await _restart_postgres(database, workers, deployment.describe)
            elif fault in ("redis-flushall", "redis-flushall-restart"):
                run.notes.append(f"Redis held at FLUSHALL: {await redis_holds(client)}")
                await client.flushall()
                if fault == "redis-flushall-restart":
                    # FLUSHALL is in the append-only file too: Redis comes back empty.
                    await asyncio.to_thread(server.stop)
                    await asyncio.to_thread(server.start)
            run.fault_ended = loop.time()
            await _until_done(run, deployment, settled(client), lossy=fault in LOSSY)
            await run.watcher.stop()
            for launched in deployment.processes:
                if launched.returncode is None:
                    code = await launched.stop()
                    if code != 0:
                        run.notes.append(f"{launched.name} exited {code}")
        users, answers_stored, _ = await stored_texts(url)
        doubled = twice(users) + twice(answers_stored)
        if doubled:
            run.notes.append(f"stored twice in PostgreSQL: {', '.join(doubled)}")
    finally:
        await run.watcher.stop()
        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(database.stop)


async def redis_holds(client: aioredis.Redis) -> str:
    """What the deployment's Redis holds of its work now, in words."""
    outbound = keys.queue_stream(outbound_queue("telegram"))
    in_mailboxes = 0
    for session in await client.smembers(keys.mailboxes()):
        name = session.decode() if isinstance(session, bytes) else str(session)
        in_mailboxes += await client.zcard(keys.mailbox(name))
    leases = [k async for k in client.scan_iter(match=keys.turn_lease("*"))]
    # The head of a session's mailbox is the message its turn under way answers.
    return (
        f"{len(leases)} turns under way, {in_mailboxes - len(leases)} messages "
        f"waiting behind them in sessions' mailboxes, {await client.xlen(outbound)} answers "
        f"queued for delivery"
    )


async def _restart_postgres(
    database: PostgresServer, workers: list[Launched], describe: Callable[[], str]
) -> None:
    """Stop PostgreSQL at once, as in a crash, until a worker has met it away; start it
    again on the same port and data folder."""
    offsets = [len(w.log) for w in workers]
    await asyncio.to_thread(database.halt, immediate=True)

    async def noticed() -> bool:
        return any(
            re.search(DATABASE_AWAY, w.log[offset:])
            for w, offset in zip(workers, offsets, strict=True)
        )

    await until(noticed, 20, "a worker meeting PostgreSQL away", describe)
    await asyncio.to_thread(database.start)


async def stored_texts(url: str) -> tuple[list[str], list[str], int]:
    """Every user text and every answer in the database's conversations, and the number of
    entries in its cost ledger."""
    store = await SqlStore.open(url)
    try:
        users: list[str] = []
        answered: list[str] = []
        entries = 0
        for session in await store.list_sessions(limit=100_000):
            for message in await store.list_messages(session.id):
                if message.role == "user":
                    users.append(message.text)
                elif message.role == "assistant":
                    answered.append(message.text)
            entries += len(await store.cost_entries(session.id))
    finally:
        await store.close()
    return users, answered, entries


def twice(texts: list[str]) -> list[str]:
    """The texts found more than once."""
    return sorted(text for text, n in Counter(texts).items() if n > 1)


async def _restart_redis(server: RedisServer, noticing: dict[str, Launched]) -> None:
    """Stop Redis until the gateway and a worker have noticed (about a second), then start it."""
    offsets = {name: len(p.log) for name, p in noticing.items()}
    await asyncio.to_thread(server.stop)
    for name, launched in noticing.items():
        await launched.until_logged(NOT_WORKING.format(LOOPS[name]), 20, after=offsets[name])
    await asyncio.to_thread(server.start)


_SQLITE_WAITING = (
    "SELECT (SELECT count(*) FROM bus_entries WHERE dead = 0)"
    " + (SELECT count(*) FROM mailbox_items)"
)


async def _embedded(run: _Run, workdir: Path, fake_openai: FakeOpenAI) -> None:
    env = clean_env(workdir, redis_url=None, telegram=run.fake, openai=fake_openai)
    database = workdir / "data" / "switchboard.db"
    loop = asyncio.get_running_loop()

    async def sqlite_settled() -> bool:
        async with aiosqlite.connect(database) as db:
            rows: Any = await db.execute_fetchall(_SQLITE_WAITING)
        return int(next(iter(rows))[0]) == 0

    try:
        async with Deployment(env, workdir) as deployment:
            first = await deployment.start("serve")
            await deployment.ready(run.fake.wait_idle_poll(timeout=30))
            run.watcher.start()
            run.started = loop.time()
            _send(run)
            await _until_fault_time(run, deployment)
            first.send_signal(signal.SIGKILL)
            await first.wait()
            second = await deployment.start("serve")
            run.fault_ended = loop.time()
            await _until_done(run, deployment, sqlite_settled, lossy=False)
            await run.watcher.stop()
            code = await second.stop()
            if code != 0:
                run.notes.append(f"{second.name} exited {code}")
    finally:
        await run.watcher.stop()
