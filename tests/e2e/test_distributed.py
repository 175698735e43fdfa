"""The distributed deployment as an operator runs it: gateway and workers as subprocesses.

Every process talks to a real `redis-server`, the Telegram Bot API fake and the OpenAI fake;
the fakes run in the test's event loop. The model answers "answer to <the user's text>" after
a delay, so each chat's reply is known and turns take long enough to be interrupted.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.bus.names import CONTROL, EVENTS, outbound_queue
from core.envelopes import EventEnvelope
from tests.e2e.processes import Deployment, clean_env, run_once, until
from tests.fakes import FakeOpenAI, FakeTelegram, Hold, Reply, Text
from tests.redis_server import RedisServer, free_port

pytestmark = pytest.mark.e2e

# The model's latency in the load tests: long enough that a killed worker holds turns.
LATENCY = 0.4
# The deployment names no bot (SWITCHBOARD_BOT_ID unset): the default namespace.
keys = RedisKeys()
# Turns the fake model can answer in one test (more than any test asks for).
MAX_TURNS = 200
# How long every chat may take to be answered in the acceptance scenario.
ANSWER_WITHIN = 45.0
FIRST_CHAT = 1001


def answers(
    delay: float, on_request: Callable[[], None] | None = None
) -> list[Callable[[dict[str, Any]], Awaitable[Reply]]]:
    """Script steps: after `delay` seconds, "answer to <the last user message>"."""

    async def answer(body: dict[str, Any]) -> Reply:
        if on_request is not None:
            on_request()
        await asyncio.sleep(delay)  # the simulated model latency
        return Text(f"answer to {_last_user_text(body)}")

    return [answer] * MAX_TURNS


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)
    return ""


def session_key(fake: FakeTelegram, chat: int) -> str:
    return f"telegram:{fake.token.partition(':')[0]}:{chat}"


def replies(fake: FakeTelegram, chats: Iterable[int]) -> dict[int, list[str]]:
    return {chat: fake.sent_texts(chat) for chat in chats}


async def until_answered(fake: FakeTelegram, chats: list[int], timeout: float) -> None:  # noqa: ASYNC109
    """Every chat has at least one message from the bot."""

    def all_answered(_call: object = None) -> bool:
        return all(fake.sent_texts(chat) for chat in chats)

    if not all_answered():
        # Each message the bot sends is a sendMessage call: look again at every one.
        await fake.wait_for_call("sendMessage", all_answered, timeout=timeout)


@asynccontextmanager
async def redis_client(url: str) -> AsyncIterator[aioredis.Redis]:
    """A client for looking at the deployment's state; it rides out a Redis restart."""
    retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=5)
    client = aioredis.Redis.from_url(url, retry=retry)
    try:
        yield client
    finally:
        await client.aclose()


def settled(client: aioredis.Redis) -> Callable[[], Awaitable[bool]]:
    """True once no mailbox waits and every delivery is shown."""

    async def check() -> bool:
        if await client.scard(keys.mailboxes()):
            return False
        return not await client.xlen(keys.queue_stream(outbound_queue("telegram")))

    return check


async def turn_leases(client: aioredis.Redis) -> dict[str, str]:
    """Session key → the token of the worker holding its turn lease."""
    prefix = keys.turn_lease("")[:-1]  # up to the session key, inside its hash tag
    held = {}
    async for name in client.scan_iter(match=f"{prefix}*"):
        token = await client.get(name)
        if token is not None:
            held[_text(name).removeprefix(prefix).removesuffix("}")] = _text(token)
    return held


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def assert_answered_once(fake: FakeTelegram, chats: list[int], describe: str) -> None:
    got = replies(fake, chats)
    wrong = {chat: texts for chat, texts in got.items() if texts != [f"answer to hello {chat}"]}
    assert not wrong, f"chats not answered exactly once: {wrong}\n{describe}"


def send_load(fake: FakeTelegram, chats: list[int]) -> None:
    for chat in chats:
        fake.private_text(chat, f"hello {chat}")


@asynccontextmanager
async def subscribed_events(url: str) -> AsyncIterator[list[EventEnvelope]]:
    """Lifecycle events from the Redis bus, collected while the block runs."""
    bus = await RedisBus.connect(url)
    subscription = await bus.subscribe(EVENTS)
    seen: list[EventEnvelope] = []

    async def collect() -> None:
        async for envelope in subscription:
            if isinstance(envelope, EventEnvelope):
                seen.append(envelope)

    collector = asyncio.create_task(collect())
    try:
        yield seen
    finally:
        collector.cancel()
        await asyncio.gather(collector, return_exceptions=True)
        await subscription.aclose()
        await bus.close()


def missing_events(events: Iterable[tuple[str, str]], expected_keys: Iterable[str]) -> list[str]:
    """What is missing for "every session has a run start and a run complete"."""
    have = set(events)
    return [
        f"{name} for {key}"
        for key in expected_keys
        for name in ("agent.run.start", "agent.run.complete")
        if (name, key) not in have
    ]


def json_events(output: str) -> list[tuple[str, str]]:
    found = []
    for line in output.splitlines():
        if line.strip():
            event = json.loads(line)
            found.append((event["name"], event["session_key"]))
    return found


@pytest.mark.timeout(90)
async def test_two_workers_answer_every_chat_once_when_one_is_killed(
    redis_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    fake_openai.script(*answers(LATENCY))
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 30))
    expected_keys = [session_key(fake, chat) for chat in chats]
    async with (
        Deployment(env, tmp_path) as deployment,
        redis_client(redis_url) as client,
        subscribed_events(redis_url) as in_test_events,
    ):
        printer = await deployment.start("events", "--json")
        gateway = await deployment.start("gateway", "telegram")
        workers = [await deployment.start("worker", "--concurrency", "2") for _ in range(2)]
        await deployment.ready(fake.wait_idle_poll(timeout=30))
        names = [
            (await worker.until_logged(r"worker (worker-\w+) taking work"))[1] for worker in workers
        ]

        async def both_subscribed() -> bool:
            [(_, count)] = await client.pubsub_numsub(keys.topic_channel(EVENTS))
            return int(count) >= 2

        await until(both_subscribed, 20, "events subscribers", deployment.describe)

        loop = asyncio.get_running_loop()
        started = loop.time()
        send_load(fake, chats)

        # Kill a worker in the middle of its turns: about a second into the load (when a
        # few rounds of four turns are answered), at a moment it holds a turn.
        victim, victim_name = workers[0], names[0]

        async def victim_busy() -> bool:
            if sum(bool(texts) for texts in replies(fake, chats).values()) < 6:
                return False
            held = await turn_leases(client)
            return any(token.startswith(f"{victim_name}:") for token in held.values())

        await until(victim_busy, 20, "a worker holding turns", deployment.describe)
        victim.send_signal(signal.SIGKILL)
        killed_at = loop.time() - started

        left = ANSWER_WITHIN - (loop.time() - started)
        await deployment.ready(until_answered(fake, chats, timeout=left), timeout=left + 1)
        answered_in = loop.time() - started
        # A turn repeated after the crash must not reach the chat twice: wait until nothing
        # is left to deliver before counting.
        await until(settled(client), 20, "work settled", deployment.describe)
        assert_answered_once(fake, chats, deployment.describe())

        def still_missing() -> dict[str, list[str]]:
            seen = {
                "in the test": [(e.name, e.session_key) for e in in_test_events],
                "from `switchboard events`": json_events(printer.output),
            }
            missing = {where: missing_events(got, expected_keys) for where, got in seen.items()}
            return {where: names for where, names in missing.items() if names}

        async def all_events_seen() -> bool:
            return not still_missing()

        await until(all_events_seen, 10, "lifecycle events", lambda: str(still_missing()))

        assert await victim.wait() == -signal.SIGKILL
        for survivor in (workers[1], gateway, printer):
            assert await survivor.stop() == 0, survivor.describe()
    print(f"30 chats answered in {answered_in:.1f}s; worker killed {killed_at:.1f}s in")


@pytest.mark.timeout(90)
async def test_a_redis_restart_mid_load_loses_and_repeats_nothing(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    requests = 0
    # With two turns at a time, the third request means turns are mid-answer.
    in_flight = asyncio.Event()

    def count() -> None:
        nonlocal requests
        requests += 1
        if requests == 3:
            in_flight.set()

    fake_openai.script(*answers(LATENCY, count))
    server = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(server.start)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 10))
    late_chat = FIRST_CHAT + 10
    env = clean_env(tmp_path, redis_url=server.url, telegram=fake, openai=fake_openai)
    try:
        async with Deployment(env, tmp_path) as deployment, redis_client(server.url) as client:
            printer = await deployment.start("events", "--json")
            gateway = await deployment.start("gateway", "telegram")
            worker = await deployment.start("worker", "--concurrency", "2")
            processes = (printer, gateway, worker)
            await deployment.ready(fake.wait_idle_poll(timeout=30))
            await worker.until_logged("taking work")

            async def printer_subscribed() -> bool:
                [(_, subscribers)] = await client.pubsub_numsub(keys.topic_channel(EVENTS))
                return int(subscribers) >= 1

            await until(printer_subscribed, 20, "events subscriber", deployment.describe)
            send_load(fake, chats)

            await deployment.ready(in_flight.wait())
            offsets = {p.name: len(p.log) for p in processes}
            await asyncio.to_thread(server.stop)
            # Down until every process has noticed, then back on the same port, data intact.
            outage = {
                # Its delivery loop, or (mid-delivery) the hold on a reply it waits for.
                gateway: (
                    r"WARNING core\.readiness: (?:telegram delivery|reply holds) is not working"
                ),
                worker: r"WARNING core\.readiness: worker sweep is not working",
                printer: r"subscription to \S+ interrupted",
            }
            for launched, noticed in outage.items():
                await launched.until_logged(noticed, 20, after=offsets[launched.name])
            await asyncio.to_thread(server.start)

            # Subscriptions come back by themselves; a message sent now is answered too.
            recovered = {
                printer: [f"subscription to {keys.topic_channel(EVENTS)} restored"],
                worker: [
                    f"subscription to {keys.topic_channel(CONTROL)} restored",
                    "worker sweep is working again",
                ],
                gateway: [r"(?:telegram delivery|reply holds) is working again"],
            }
            for launched in (printer, worker):
                await launched.until_logged(recovered[launched][0], after=offsets[launched.name])
            fake.private_text(late_chat, f"hello {late_chat}")
            everyone = [*chats, late_chat]
            await deployment.ready(until_answered(fake, everyone, timeout=30), timeout=35)
            await until(settled(client), 30, "work settled", deployment.describe)
            assert_answered_once(fake, everyone, deployment.describe())
            for launched, lines in recovered.items():
                for line in lines:
                    await launched.until_logged(line, 5, after=offsets[launched.name])

            async def late_chat_event_printed() -> bool:
                late = ("agent.run.complete", session_key(fake, late_chat))
                return late in json_events(printer.output)

            await until(late_chat_event_printed, 10, "events after the restart", printer.describe)
            assert all(p.returncode is None for p in processes), deployment.describe()
            for launched in processes:
                assert await launched.stop() == 0, launched.describe()
    finally:
        await asyncio.to_thread(server.stop)


async def test_an_update_delivered_twice_is_answered_once(
    redis_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    fake_openai.script(*answers(LATENCY))
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    chat = FIRST_CHAT
    async with Deployment(env, tmp_path) as deployment, redis_client(redis_url) as client:
        await deployment.start("gateway", "telegram")
        workers = [await deployment.start("worker") for _ in range(2)]
        await deployment.ready(fake.wait_idle_poll(timeout=30))
        for worker in workers:
            await worker.until_logged("taking work")

        # Telegram may hand the same message over again (a retried webhook, a lost offset):
        # once while the first copy is being answered, once after it was.
        update = fake.private_text(chat, f"hello {chat}")
        fake.redeliver(update)
        await deployment.ready(until_answered(fake, [chat], timeout=20), timeout=25)
        await until(settled(client), 20, "work settled", deployment.describe)
        fake.redeliver(update)

        def skipped() -> int:
            return sum(w.log.count(f"skipping {session_key(fake, chat)}:") for w in workers)

        async def both_copies_skipped() -> bool:
            return skipped() == 2

        await until(both_copies_skipped, 20, "both copies seen by a worker", deployment.describe)
        await until(settled(client), 20, "work settled", deployment.describe)
        assert_answered_once(fake, [chat], deployment.describe())
        assert len(fake_openai.requests) == 1, deployment.describe()


@pytest.mark.timeout(90)
async def test_a_standby_gateway_takes_over_polling_when_the_active_one_stops(
    redis_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    fake_openai.script(*answers(0))
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    chats = list(range(FIRST_CHAT, FIRST_CHAT + 5))
    async with Deployment(env, tmp_path) as deployment:
        gateways = [await deployment.start("gateway", "telegram") for _ in range(2)]
        worker = await deployment.start("worker")
        took, standing_by = r"took telegram-poller:", r"holds telegram-poller:\S+; standing by"

        async def one_active_one_standby() -> bool:
            active = [g for g in gateways if re.search(took, g.log)]
            waiting = [g for g in gateways if re.search(standing_by, g.log)]
            return len(active) == 1 and len(waiting) == 1 and active != waiting

        await until(one_active_one_standby, 20, "one active gateway", deployment.describe)
        [active] = [g for g in gateways if re.search(took, g.log)]
        [standby] = [g for g in gateways if g is not active]
        await deployment.ready(fake.wait_idle_poll(timeout=30))
        await worker.until_logged("taking work")
        send_load(fake, chats)
        await deployment.ready(until_answered(fake, chats, timeout=20), timeout=25)
        # Only the active one polls Telegram (each Bot API request is an httpx log line); the
        # standby may deliver answers meanwhile.
        assert "/getUpdates" in active.log, active.describe()
        assert "/getUpdates" not in standby.log, standby.describe()
        # A first message is not the whole answer: the stop comes once every turn is over and
        # delivered. (A gateway stopped mid-stream leaves the rest to the other one, which
        # sends the final text as a message of its own; that is not what this test is about.)
        lease = keys.lease((await active.until_logged(r"took (telegram-poller:\S+)"))[1])
        async with redis_client(redis_url) as client:
            await until(settled(client), 20, "work settled", deployment.describe)
            held_by = await client.get(lease)
            assert held_by is not None, active.describe()
            loop = asyncio.get_running_loop()
            stopped = loop.time()
            assert await active.stop() == 0, active.describe()
            # Released on SIGTERM (gone, or the standby's already): the standby's next try
            # (every 2 s) takes it, not the end of its 15 s TTL.
            assert await client.get(lease) != held_by, active.describe()
        assert "could not release" not in active.log, active.describe()
        await standby.until_logged(took, 20)
        took_over_in = loop.time() - stopped
        await deployment.ready(fake.wait_idle_poll(timeout=20))
        late_chat = FIRST_CHAT + len(chats)
        fake.private_text(late_chat, f"hello {late_chat}")
        everyone = [*chats, late_chat]
        await deployment.ready(until_answered(fake, everyone, timeout=20), timeout=25)
        assert_answered_once(fake, everyone, deployment.describe())
        assert standby.returncode is None and worker.returncode is None, deployment.describe()
    print(f"the standby took over {took_over_in:.1f}s after the active gateway stopped")


async def test_distributed_commands_name_redis_url_and_health_reports_one_line(
    redis_url: str, tmp_path: Path
) -> None:
    without = clean_env(tmp_path, redis_url=None, TELEGRAM_BOT_TOKEN="123:not-used")
    closed = clean_env(tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with_redis = clean_env(tmp_path, redis_url=redis_url)
    needs_redis = [["worker"], ["gateway", "telegram"], ["events"]]
    # The embedded store exists once a chat has run (health never makes one: a mistyped data
    # folder must not look healthy).
    made = await run_once(["chat"], without, tmp_path)
    assert made.returncode == 0, made
    runs = await asyncio.gather(
        *(run_once(args, without, tmp_path) for args in needs_redis),
        run_once(["health"], with_redis, tmp_path),
        run_once(["health"], without, tmp_path),
        run_once(["health"], closed, tmp_path),
    )
    *refused, healthy_redis, healthy_sqlite, unhealthy = runs

    for args, result in zip(needs_redis, refused, strict=True):
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0, (args, result)
        assert len(lines) == 1 and "REDIS_URL" in lines[0], (args, result)
    assert healthy_redis.returncode == 0, healthy_redis
    assert healthy_redis.stdout.endswith(", redis)\n"), healthy_redis
    assert healthy_sqlite.returncode == 0, healthy_sqlite
    assert str(tmp_path / "data") in healthy_sqlite.stdout, healthy_sqlite
    assert (tmp_path / "data" / "switchboard.db").exists()
    assert unhealthy.returncode != 0, unhealthy
    assert len(unhealthy.stderr.strip().splitlines()) == 1, unhealthy
    assert "Traceback" not in unhealthy.stderr, unhealthy


async def test_a_worker_stopped_mid_turn_finishes_it_and_exits_cleanly(
    redis_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    fake = fake_telegram
    asked = asyncio.Event()
    fake_openai.script(*answers(1.5, asked.set))
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    chat = FIRST_CHAT
    async with Deployment(env, tmp_path) as deployment:
        await deployment.start("gateway", "telegram")
        worker = await deployment.start("worker")
        await deployment.ready(fake.wait_idle_poll(timeout=30))
        await worker.until_logged("taking work")
        send_load(fake, [chat])
        await deployment.ready(asked.wait())

        worker.send_signal(signal.SIGTERM)
        assert await worker.wait(timeout=15) == 0, worker.describe()
        await deployment.ready(until_answered(fake, [chat], timeout=10), timeout=15)
        assert_answered_once(fake, [chat], deployment.describe())
        assert "stopping" in worker.log, worker.describe()


@pytest.mark.timeout(90)
async def test_stop_stops_a_turn_in_the_distributed_deployment(
    redis_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    """Gateway and two workers over Redis: `/stop`, whichever worker takes it off the inbound
    queue, stops the turn where it runs (the control topic); the model call is dropped and the
    next message is answered. (That another worker's stop reaches the turn, for certain:
    tests/integration/test_stop_distributed.py.)"""
    fake = fake_telegram
    fake_openai.script(Hold("Once upon a time"), Text("answer to and now?"))
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake, openai=fake_openai)
    chat = FIRST_CHAT
    key = session_key(fake, chat)
    async with Deployment(env, tmp_path) as deployment:
        await deployment.start("gateway", "telegram")
        workers = [await deployment.start("worker") for _ in range(2)]
        await deployment.ready(fake.wait_idle_poll(timeout=30))
        for worker in workers:
            await worker.until_logged("taking work")
        fake.private_text(chat, "tell me a long story")

        def streaming(_call: object = None) -> bool:
            return any("Once upon a time" in text for text in fake.sent_texts(chat))

        await deployment.ready(fake.wait_for_call("sendMessage", streaming, timeout=20))
        fake.private_text(chat, "/stop")

        def stopped(_call: object = None) -> bool:
            return any("— stopped" in text for text in fake.sent_texts(chat))

        await deployment.ready(fake.wait_for_call("editMessageText", stopped, timeout=20))
        await deployment.ready(asyncio.wait_for(fake_openai.dropped.wait(), 20))
        fake.private_text(chat, "and now?")

        def answered(_call: object = None) -> bool:
            return "answer to and now?" in fake.sent_texts(chat)

        await deployment.ready(fake.wait_for_call("sendMessage", answered, timeout=20))
        stopping = [w for w in workers if f"stopping the turn of {key}" in w.log]
        assert len(stopping) == 1, deployment.describe()
        assert fake.sent_texts(chat)[1] == "Stopped.", deployment.describe()
