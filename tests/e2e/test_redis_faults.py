"""Redis faults against the real distributed processes: nobody goes deaf, nothing is doubled.

A gateway, two workers and a scheduler run against a `redis-server` this module starts (so
it can stop and start it), the Telegram fake and the OpenAI fake. Redis is stopped mid-load
until every process has noticed, then started again: with its append-only file (nothing is
lost), or empty (what was in Redis is lost, and nothing may be answered twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.faults import LOOPS, NOT_WORKING, WORKING
from tests.e2e.processes import Deployment, Launched, clean_env, run_once, until
from tests.e2e.test_distributed import answers, redis_client, settled
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.redis_server import RedisServer, free_port

pytestmark = pytest.mark.e2e

LATENCY = 0.3
FIRST_CHAT = 2001
TOKEN = "t" * 32


@dataclass
class Tally:
    """What the bot did with the messages sent: each counted on the Telegram fake."""

    sent: int
    answered: int
    duplicated: int
    lost: int

    def __str__(self) -> str:
        return (
            f"sent {self.sent}, answered {self.answered}, "
            f"duplicated {self.duplicated}, lost {self.lost}"
        )


def tally(fake: FakeTelegram, expected: dict[int, list[str]]) -> Tally:
    """Each expected answer counted in its chat: once is answered, more is duplicated."""
    sent = answered = duplicated = lost = 0
    for chat, wanted in expected.items():
        texts = fake.sent_texts(chat)
        for text in wanted:
            sent += 1
            seen = texts.count(text)
            answered += seen >= 1
            duplicated += max(0, seen - 1)
            lost += seen == 0
    return Tally(sent, answered, duplicated, lost)


def apologies(fake: FakeTelegram, expected: dict[int, list[str]]) -> list[str]:
    """Every text sent to the chats that says the bot failed instead of answering."""
    return [
        text
        for chat in expected
        for text in fake.sent_texts(chat)
        if "went wrong" in text or "try again" in text
    ]


def model_calls(fake: FakeOpenAI) -> int:
    """How many times the model was asked (each one paid for)."""
    return sum(1 for r in fake.requests if r.path.endswith("/chat/completions"))


def tracebacks(processes: dict[str, Launched]) -> list[str]:
    """The processes whose log holds a traceback."""
    return [name for name, p in processes.items() if "Traceback" in p.log]


def send(fake: FakeTelegram, chats: Iterable[int], word: str) -> dict[int, list[str]]:
    """One message per chat; the answer each should get."""
    expected = {}
    for chat in chats:
        fake.private_text(chat, f"{word} {chat}")
        expected[chat] = [f"answer to {word} {chat}"]
    return expected


def merged(*parts: dict[int, list[str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for part in parts:
        for chat, texts in part.items():
            out.setdefault(chat, []).extend(texts)
    return out


async def until_answered(
    fake: FakeTelegram,
    expected: dict[int, list[str]],
    timeout: float,  # noqa: ASYNC109 - a test's deadline
) -> None:
    """Every expected answer has been sent at least once."""

    def done(_call: object = None) -> bool:
        return all(
            all(text in fake.sent_texts(chat) for text in texts) for chat, texts in expected.items()
        )

    if not done():
        # Each answer is a sendMessage (edits follow it): look again at every one.
        await fake.wait_for_call("sendMessage", done, timeout=timeout)


def counting(after: int) -> tuple[asyncio.Event, Callable[[], None]]:
    """An event set once the fake model was asked `after` times (turns are mid-answer)."""
    asked = asyncio.Event()
    requests = 0

    def count() -> None:
        nonlocal requests
        requests += 1
        if requests == after:
            asked.set()

    return asked, count


async def start_deployment(
    deployment: Deployment, fake: FakeTelegram, **ports: str
) -> dict[str, Launched]:
    """A gateway, two workers and a scheduler, waited for until they take work."""
    gateway = await deployment.start("gateway", "telegram", **_metrics(ports.get("gateway")))
    workers = [
        await deployment.start("worker", "--concurrency", "3", **_metrics(ports.get(f"worker{i}")))
        for i in range(2)
    ]
    scheduler = await deployment.start("scheduler", **_metrics(ports.get("scheduler")))
    await deployment.ready(fake.wait_idle_poll(timeout=30))
    for worker in workers:
        await worker.until_logged("taking work")
    await scheduler.until_logged("scheduler running")
    return {
        "gateway": gateway,
        "worker0": workers[0],
        "worker1": workers[1],
        "scheduler": scheduler,
    }


def _metrics(port: str | None) -> dict[str, str]:
    if port is None:
        return {}
    return {"SWITCHBOARD_METRICS_PORT": port, "SWITCHBOARD_METRICS_TOKEN": TOKEN}


async def restart_when_noticed(
    server: RedisServer, processes: dict[str, Launched], deployment: Deployment
) -> dict[str, int]:
    """Stop Redis until every process that waits on it says it is not working, then start it
    again (the scheduler, whose schedules are in the database, need not notice).

    Returns where each process's log stood before the stop.
    """
    offsets = {name: len(p.log) for name, p in processes.items()}
    noticing = {name: p for name, p in processes.items() if name.rstrip("01") in LOOPS}
    await asyncio.to_thread(server.stop)
    for name, launched in noticing.items():
        loop = LOOPS[name.rstrip("01")]
        await launched.until_logged(NOT_WORKING.format(loop), 20, after=offsets[name])
    await asyncio.to_thread(server.start)
    for name, launched in noticing.items():
        loop = LOOPS[name.rstrip("01")]
        await launched.until_logged(WORKING.format(loop), 30, after=offsets[name])
    assert all(p.returncode is None for p in processes.values()), deployment.describe()
    return offsets


async def stop_all(processes: dict[str, Launched]) -> None:
    for launched in processes.values():
        assert await launched.stop() == 0, launched.describe()


@pytest.mark.timeout(120)
async def test_a_redis_restart_with_aof_mid_load_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    in_flight, count = counting(after=4)
    fake_openai.script(*answers(LATENCY, count))
    server = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(server.start)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 10))
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    try:
        async with Deployment(env, tmp_path) as deployment, redis_client(server.url) as client:
            processes = await start_deployment(deployment, fake)
            # 10 chats x 2 messages, the second sent while the first is being answered.
            load = merged(send(fake, chats, "first"), send(fake, chats, "second"))
            await deployment.ready(in_flight.wait())

            await restart_when_noticed(server, processes, deployment)

            late = send(fake, range(FIRST_CHAT + 10, FIRST_CHAT + 13), "late")
            everything = merged(load, late)
            await deployment.ready(until_answered(fake, everything, 45), timeout=50)
            await until(settled(client), 30, "work settled", deployment.describe)
            result = tally(fake, everything)
            assert (result.duplicated, result.lost) == (0, 0), f"{result}\n{deployment.describe()}"
            assert result.sent == 23
            # The turns the restart caught waited for Redis: none apologized, none asked the
            # model a second time (each call is paid for).
            assert apologies(fake, everything) == [], deployment.describe()
            assert model_calls(fake_openai) == result.sent, deployment.describe()
            # The outage is told in a line when it starts and one when it ends, per loop:
            # no traceback for what was waited out.
            assert tracebacks(processes) == [], deployment.describe()
            await stop_all(processes)
    finally:
        await asyncio.to_thread(server.stop)
    print(f"Redis restarted with AOF mid-load: {result}")


@pytest.mark.timeout(120)
async def test_after_redis_comes_back_empty_the_processes_carry_on_and_answer_nothing_twice(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    # Some answers shown (their processed marks are then lost with Redis), more in flight.
    in_flight, count = counting(after=8)
    fake_openai.script(*answers(LATENCY, count))
    server = RedisServer(tmp_path / "redis", persistent=False)
    await asyncio.to_thread(server.start)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 10))
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    try:
        async with Deployment(env, tmp_path) as deployment, redis_client(server.url) as client:
            processes = await start_deployment(deployment, fake)
            load = merged(send(fake, chats, "first"), send(fake, chats, "second"))
            await deployment.ready(in_flight.wait())

            offsets = await restart_when_noticed(server, processes, deployment)

            # Groups and leases come back by themselves: new messages are answered.
            late = send(fake, range(FIRST_CHAT + 10, FIRST_CHAT + 13), "late")
            await deployment.ready(until_answered(fake, late, 45), timeout=50)
            await until(settled(client), 30, "work settled", deployment.describe)
            before = tally(fake, load)
            after = tally(fake, late)
            # What Redis held when it restarted empty may be lost; nothing may come twice.
            assert before.duplicated == 0, f"{before}\n{deployment.describe()}"
            assert (after.answered, after.duplicated) == (3, 0), f"{after}"
            gateway = processes["gateway"]
            assert "Traceback" not in gateway.log[offsets["gateway"] :], gateway.describe()
            await stop_all(processes)
    finally:
        await asyncio.to_thread(server.stop)
    print(f"Redis restarted empty mid-load: {before}; after the restart: {after}")


@pytest.mark.timeout(120)
async def test_redis_down_longer_than_a_turn_lease_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # Down until a worker gave a turn lease up (9 of its 10 s): Redis (AOF) expires those
    # leases while it is down, and the workers race to claim the sessions again when it is
    # back. Before the holder gave up by itself, two workers could run one turn and the
    # stale one's "Cancelled." took the place of the answer.
    fake = fake_telegram
    in_flight, count = counting(after=4)
    fake_openai.script(*answers(LATENCY, count))
    server = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(server.start)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 10))
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    try:
        async with Deployment(env, tmp_path) as deployment, redis_client(server.url) as client:
            processes = await start_deployment(deployment, fake)
            load = merged(send(fake, chats, "first"), send(fake, chats, "second"))
            await deployment.ready(in_flight.wait())
            workers = [processes["worker0"], processes["worker1"]]
            offsets = [len(w.log) for w in workers]
            await asyncio.to_thread(server.stop)

            async def a_lease_given_up() -> bool:
                return any(
                    "Redis did not renew it in time" in w.log[offset:]
                    for w, offset in zip(workers, offsets, strict=True)
                )

            await until(a_lease_given_up, 30, "a turn lease given up", deployment.describe)
            await asyncio.to_thread(server.start)

            late = send(fake, range(FIRST_CHAT + 10, FIRST_CHAT + 13), "late")
            everything = merged(load, late)
            await deployment.ready(until_answered(fake, everything, 60), timeout=65)
            await until(settled(client), 30, "work settled", deployment.describe)
            result = tally(fake, everything)
            assert (result.duplicated, result.lost) == (0, 0), f"{result}\n{deployment.describe()}"
            for chat, wanted in everything.items():
                assert fake.sent_texts(chat) == wanted, deployment.describe()
            await stop_all(processes)
    finally:
        await asyncio.to_thread(server.stop)


@pytest.mark.timeout(90)
async def test_readiness_and_health_follow_redis(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    fake_openai.script(*answers(0))
    server = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(server.start)
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    ports = {name: str(free_port()) for name in ("gateway", "worker0", "scheduler")}
    try:
        async with Deployment(env, tmp_path) as deployment, aiohttp.ClientSession() as http:
            processes = await start_deployment(deployment, fake, **ports)

            async def statuses() -> dict[str, int]:
                found = {}
                for name, port in ports.items():
                    url = f"http://127.0.0.1:{port}/readyz"
                    headers = {"Authorization": f"Bearer {TOKEN}"}
                    async with http.get(url, headers=headers) as response:
                        found[name] = response.status
                return found

            def all_are(status: int) -> Callable[[], Awaitable[bool]]:
                async def check() -> bool:
                    return set((await statuses()).values()) == {status}

                return check

            await until(all_are(200), 20, "ready", deployment.describe)
            healthy = await run_once(["health"], env, tmp_path)
            assert healthy.returncode == 0, healthy

            await asyncio.to_thread(server.stop)
            await until(all_are(503), 20, "not ready while Redis is down", deployment.describe)
            unhealthy = await run_once(["health"], env, tmp_path)
            assert unhealthy.returncode == 1, unhealthy
            assert len(unhealthy.stderr.strip().splitlines()) == 1, unhealthy
            assert unhealthy.stderr.startswith("not ok"), unhealthy
            assert "Traceback" not in unhealthy.stderr, unhealthy

            await asyncio.to_thread(server.start)
            await until(all_are(200), 30, "ready again", deployment.describe)
            chat = FIRST_CHAT + 50
            expected = send(fake, [chat], "back")
            await deployment.ready(until_answered(fake, expected, 20), timeout=25)
            assert all(p.returncode is None for p in processes.values()), deployment.describe()
            await stop_all(processes)
    finally:
        await asyncio.to_thread(server.stop)
