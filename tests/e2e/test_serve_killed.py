"""`switchboard serve` (embedded: SQLite, no Redis) SIGKILLed under load loses nothing.

10 chats send 3 messages each to the Telegram fake; the OpenAI fake answers each after a model
latency. Once some answers are shown and the next turns wait in the model call, the process is
SIGKILLed, then started again on the same data directory. Every message must be answered
exactly once: the updates Telegram was told we received are in SQLite (queues and mailboxes),
and those we never confirmed come again.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from tests.e2e.processes import clean_env
from tests.e2e.served import serve
from tests.fakes import FakeOpenAI, FakeTelegram, Reply, Text

pytestmark = pytest.mark.e2e

CHATS = [2001 + n for n in range(10)]
PER_CHAT = 3
LATENCY = 0.3
START_PATIENCE = 20.0
# Model calls answered before the kill; those after it are held in the model until then.
KILL_AFTER = 8
ANSWER_WITHIN = 25.0
OUTBOUND_WAITING = "SELECT count(*) FROM bus_entries WHERE queue LIKE 'outbound.%' AND dead = 0"
ALL_WAITING = (
    "SELECT (SELECT count(*) FROM bus_entries WHERE dead = 0)"
    " + (SELECT count(*) FROM mailbox_items)"
)


def _answers(
    count: int, gate: asyncio.Event, holding: asyncio.Event
) -> list[Callable[[dict[str, Any]], Awaitable[Reply]]]:
    """Model replies after `LATENCY`; those after the first `KILL_AFTER` wait for `gate` too
    (`holding` is set when the first of them arrives)."""
    taken = 0

    async def answer(body: dict[str, Any]) -> Reply:
        nonlocal taken
        taken += 1
        await asyncio.sleep(LATENCY)  # the model thinking
        if taken > KILL_AFTER:
            holding.set()
            await gate.wait()  # held while the process is killed
        return Text(f"answer to {_last_user_text(body)}")

    return [answer] * count


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def _answered(fake: FakeTelegram) -> Counter[str]:
    """How many messages the bot sent answering each text."""
    return Counter(
        text.removeprefix("answer to ")
        for chat in CHATS
        for text in fake.sent_texts(chat)
        if text.startswith("answer to ")
    )


async def _waiting(database: Path, sql: str) -> int:
    async with aiosqlite.connect(database) as db:
        rows = await db.execute_fetchall(sql)
    return int(next(iter(rows))[0])


async def _until_none(database: Path, sql: str) -> None:
    """Wait for the other process to settle: `sql` counts what must be gone."""
    for _ in range(200):
        if await _waiting(database, sql) == 0:
            return
        await asyncio.sleep(0.05)  # waiting on another process, bounded
    raise AssertionError(f"still {await _waiting(database, sql)} of {sql}")


@pytest.mark.timeout(60)
async def test_serve_killed_under_load_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_telegram
    model_gate, holding = asyncio.Event(), asyncio.Event()
    # Enough for every message twice over: a turn cut off by the kill runs again.
    fake_openai.script(*_answers(2 * len(CHATS) * PER_CHAT, model_gate, holding))
    database = tmp_path / "data" / "switchboard.db"
    env = clean_env(tmp_path, redis_url=None, telegram=fake, openai=fake_openai)
    sent = [f"m{chat}-{n}" for n in range(PER_CHAT) for chat in CHATS]

    async with serve(env, tmp_path) as first:
        await first.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        for n in range(PER_CHAT):
            for chat in CHATS:
                fake.private_text(chat, f"m{chat}-{n}")
        await first.unless_exited(asyncio.ensure_future(asyncio.wait_for(holding.wait(), 20)))
        # Killed with turns in the model call, work in mailboxes and updates confirmed to
        # Telegram, but no answer between being sent and being recorded: Telegram has no
        # idempotency key, so nothing can make that moment exactly-once (docs/deploy.md).
        await _until_none(database, OUTBOUND_WAITING)
        first.process.send_signal(signal.SIGKILL)
        await first.process.wait()
    before = sum(_answered(fake).values())
    assert 0 < before < len(sent), "the kill came too early or too late to test anything"

    model_gate.set()
    async with serve(env, tmp_path) as second:
        everything = asyncio.ensure_future(
            fake.wait_for_call(
                "sendMessage",
                lambda _call: set(_answered(fake)) >= set(sent),
                timeout=ANSWER_WITHIN,
            )
        )
        await second.unless_exited(everything)
        everything.result()  # raises if the wait timed out
        await _until_none(database, ALL_WAITING)
        assert await second.terminate(10.0) == 0, second.log

    answered = _answered(fake)
    lost = [text for text in sent if answered[text] == 0]
    doubled = {text: count for text, count in answered.items() if count > 1}
    print(f"sent {len(sent)}, answered before the kill {before}, lost {lost}, doubled {doubled}")
    assert (lost, doubled) == ([], {})
