"""The records acceptance scenario, shared by `tests/e2e/test_records_acceptance.py` (a small
load) and `bench/records.py` (the acceptance's 50 chats x 4 messages, with figures).

A distributed deployment as an operator runs it: a gateway and two `switchboard worker`
processes (as the Procfile starts them), records in PostgreSQL (`DATABASE_URL`), Redis for
coordination (`REDIS_URL`: one server or a cluster). Telegram DMs are under pairing: most chats
are on the profile's allowlist, the first few are strangers who get a code the operator
approves with `switchboard pairing approve`. Each chat sends its messages one after the other,
the next once the last is answered. Then Redis is emptied (`FLUSHALL` on every node) and
restarted on its port under the running processes: `switchboard pairing list` and `switchboard
cost --by day` print what they printed before, each chat's next message is answered with its
whole history, and `switchboard events`, subscribed all along, shows those turns.

The model is the OpenAI fake: it answers "re <the message> after <n>", n being the user
messages it was shown before it (the conversation's history), and records what it saw.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio.cluster import RedisCluster

from core.backends.redis.client import connect_redis
from tests.e2e.processes import REPO, Deployment, Finished, Launched, clean_env, run_once, until
from tests.fakes import FakeOpenAI, FakeTelegram, Reply, Text

__all__ = ["Operator", "Outcome", "run_acceptance"]

FIRST_CHAT = 5001
# Messages each chat sends before Redis is emptied (one more after).
MESSAGES = 4
# Of the chats, these many are strangers who pair (the others are on the allowlist).
STRANGERS = 2
_PAIRING_CODE = re.compile(r"\b([A-HJ-NP-Z2-9]{8})\b")
_ASKED = re.compile(r"^c(\d+) m(\d+)$")
COMPLETE = "agent.run.complete"

# What the operator runs at the end (on the restarted Redis); what it delivered to which chat.
AfterRestart = Callable[["Operator", Deployment], Awaitable[dict[int, list[str]]]]


@dataclass
class Outcome:
    """What the scenario saw: messages sent and answered, and how long its phases took."""

    sent: int
    answered: int
    doubled: int
    lost: int
    load_seconds: float
    after_restart_seconds: float


@dataclass
class Operator:
    """What the operator runs beside the deployment: one-shot `switchboard` commands."""

    env: dict[str, str]
    workdir: Path

    async def run(self, *args: str) -> Finished:
        done = await run_once(args, self.env, self.workdir, timeout=60)
        assert done.returncode == 0, (args, done)
        return done


@dataclass
class HistoryModel:
    """The OpenAI fake's script: "re <message> after <n>", and the user texts of each call
    per chat."""

    asked: dict[int, list[list[str]]] = field(default_factory=dict)

    async def answer(self, body: dict[str, Any]) -> Reply:
        said = _user_texts(body)
        last = said[-1] if said else ""
        found = _ASKED.match(last)
        if found is not None:
            self.asked.setdefault(int(found[1]), []).append(said)
        return Text(f"re {last} after {len(said) - 1}")

    def steps(self, turns: int) -> list[Callable[[dict[str, Any]], Awaitable[Reply]]]:
        return [self.answer] * turns


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            texts.append(str(content))
    return texts


def operator_profiles(tmp_path: Path, allowed: Sequence[int]) -> Path:
    """The repo's profiles, Telegram DMs under pairing (the default) with `allowed` on the
    allowlist: everyone else gets a pairing code."""
    target = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", target)
    users = ", ".join(f'"{user}"' for user in allowed)
    with (target / "default" / "profile.toml").open("a", encoding="utf-8") as toml:
        toml.write(f"\n[allow.telegram]\nusers = [{users}]\n")
    return target


async def say(fake: FakeTelegram, chat: int, text: str, within: float) -> str:
    """Send `text` in the private chat `chat` and return the bot's next message there."""
    after = len(fake.calls)
    before = len(fake.sent_texts(chat))
    fake.private_text(chat, text)
    await fake.wait_for_call(
        "sendMessage",
        lambda _call: len(fake.sent_texts(chat)) > before,
        timeout=within,
        after=after,
    )
    return fake.sent_texts(chat)[before]


async def converse(fake: FakeTelegram, chat: int, numbers: range, within: float) -> None:
    """Each message of `numbers` in turn, the next once the last is answered, as a person
    chats."""
    for number in numbers:
        await say(fake, chat, f"c{chat} m{number}", within)


def expected_history(chat: int, upto: int) -> list[list[str]]:
    """What the model must have seen in `chat`: each call, every message so far."""
    return [[f"c{chat} m{n}" for n in range(1, k + 1)] for k in range(1, upto + 1)]


def expected_replies(chat: int, upto: int) -> list[str]:
    return [f"re c{chat} m{k} after {k - 1}" for k in range(1, upto + 1)]


async def pair(fake: FakeTelegram, operator: Operator, chat: int, within: float) -> None:
    """A stranger asks, gets a code, the operator approves it with the CLI."""
    answer = await say(fake, chat, "hello", within)
    found = _PAIRING_CODE.search(answer)
    assert found is not None, answer
    approved = await operator.run("pairing", "approve", "telegram", found[1])
    assert f"Approved telegram user {chat}" in approved.stdout, approved


async def flush_everything(url: str) -> None:
    """`FLUSHALL` on every node Redis has (one server, or each primary of a cluster)."""
    client = connect_redis(url)
    try:
        if isinstance(client, RedisCluster):
            await client.flushall(target_nodes=RedisCluster.PRIMARIES)
        else:
            await client.flushall()
    finally:
        await client.aclose()


def _lines(printer: Launched) -> list[str]:
    """The whole lines `printer` wrote so far (not one it is still writing)."""
    return [line for line in printer.output.splitlines(keepends=True) if line.endswith("\n")]


def printed_events(printer: Launched, after: int = 0) -> list[tuple[str, str]]:
    """(name, session key) of each event `switchboard events --json` printed, from line
    `after` on."""
    found = []
    for line in _lines(printer)[after:]:
        if line.strip():
            event = json.loads(line)
            found.append((event["name"], event.get("session_key") or ""))
    return found


async def until_printing(operator: Operator, printer: Launched, within: float) -> int:
    """Once `switchboard events` is subscribed (it prints the event `switchboard health`
    publishes), the number of lines it printed."""

    async def printed_a_health_check() -> bool:
        mark = len(_lines(printer))
        await operator.run("health")
        return ("health.check", "") in printed_events(printer, mark)

    await until(printed_a_health_check, within, "switchboard events printing", printer.describe)
    return len(_lines(printer))


def session_key(fake: FakeTelegram, chat: int) -> str:
    return f"telegram:{fake.token.partition(':')[0]}:{chat}"


def total_calls(table: str) -> int:
    """The calls of the `total` row of `switchboard cost --by day`."""
    rows = [line for line in table.splitlines() if "total" in line]
    assert len(rows) == 1, table
    cells = [cell for cell in re.split(r"[\s│|]+", rows[0]) if cell]
    return int(cells[1])


async def run_acceptance(
    url: str,
    restart: Callable[[], None],
    postgres_url: str,
    fake: FakeTelegram,
    fake_openai: FakeOpenAI,
    workdir: Path,
    *,
    chats: int,
    within: float,
    after_restart: AfterRestart | None = None,
) -> Outcome:
    """The scenario with `chats` chats on the Redis at `url` (`restart` restarts it on its
    port); each answer must come `within` seconds. Fails (AssertionError) on a lost or wrong
    answer, a history missing a message, or a record gone with Redis."""
    numbers = list(range(FIRST_CHAT, FIRST_CHAT + chats))
    strangers, allowed = numbers[:STRANGERS], numbers[STRANGERS:]
    model = HistoryModel()
    fake_openai.script(*model.steps(chats * (MESSAGES + 2)))
    env = clean_env(
        workdir,
        redis_url=url,
        telegram=fake,
        openai=fake_openai,
        DATABASE_URL=postgres_url,
        SWITCHBOARD_PROFILES_DIR=str(operator_profiles(workdir, allowed)),
    )
    operator = Operator(env, workdir)
    await flush_everything(url)
    loop = asyncio.get_running_loop()

    async with Deployment(env, workdir) as deployment:
        # The operator watches the lifecycle events, across the restart too.
        printer = await deployment.start("events", "--json")
        await deployment.start("gateway", "telegram")
        workers = [await deployment.start("worker") for _ in range(2)]
        await deployment.ready(fake.wait_idle_poll(timeout=within), timeout=within + 5)
        for worker in workers:
            await worker.until_logged(r"worker (worker-\w+) taking work", within)

        for stranger in strangers:
            await deployment.ready(pair(fake, operator, stranger, within), timeout=within)
        started = loop.time()
        load = asyncio.gather(
            *(converse(fake, chat, range(1, MESSAGES + 1), within) for chat in numbers)
        )
        await deployment.ready(load, timeout=within * MESSAGES)
        load_seconds = loop.time() - started

        for chat in numbers:
            assert model.asked[chat] == expected_history(chat, MESSAGES), chat
        approvals = await operator.run("pairing", "list", "telegram")
        costs = await operator.run("cost", "--by", "day")
        for stranger in strangers:
            assert str(stranger) in approvals.stdout, approvals
        assert total_calls(costs.stdout) == chats * MESSAGES, costs

        # Redis loses everything it held, and comes back empty on the same port.
        await flush_everything(url)
        await asyncio.to_thread(restart)
        assert (await operator.run("pairing", "list", "telegram")).stdout == approvals.stdout
        assert (await operator.run("cost", "--by", "day")).stdout == costs.stdout
        mark = await until_printing(operator, printer, within)

        started = loop.time()
        nexts = asyncio.gather(
            *(converse(fake, chat, range(MESSAGES + 1, MESSAGES + 2), within) for chat in numbers)
        )
        await deployment.ready(nexts, timeout=within * 2)
        after_restart_seconds = loop.time() - started
        for chat in numbers:
            assert model.asked[chat] == expected_history(chat, MESSAGES + 1), chat
        completed = {session_key(fake, chat) for chat in numbers}

        async def every_turn_shown() -> bool:
            shown = {key for name, key in printed_events(printer, mark) if name == COMPLETE}
            return completed <= shown

        await until(every_turn_shown, within, "the events of the turns", printer.describe)
        # The turns since are counted on top.
        later = await operator.run("cost", "--by", "day")
        assert total_calls(later.stdout) == chats * (MESSAGES + 1), later
        delivered = {} if after_restart is None else await after_restart(operator, deployment)

        for process in deployment.processes:
            assert process.returncode is None, deployment.describe()
        for process in list(deployment.processes):
            assert await process.stop() == 0, process.describe()

    # Counted once every process is gone, so that nothing can arrive late.
    expected = {
        chat: expected_replies(chat, MESSAGES + 1) + delivered.get(chat, []) for chat in numbers
    }
    shown = {chat: fake.sent_texts(chat)[(1 if chat in strangers else 0) :] for chat in numbers}
    wanted = sum(len(texts) for texts in expected.values())
    answered = sum(len(set(expected[chat]) & set(shown[chat])) for chat in numbers)
    return Outcome(
        sent=chats * (MESSAGES + 1),
        answered=answered,
        doubled=sum(len(texts) - len(set(texts)) for texts in shown.values()),
        lost=wanted - answered,
        load_seconds=load_seconds,
        after_restart_seconds=after_restart_seconds,
    )
