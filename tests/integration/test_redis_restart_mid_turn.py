"""Turns caught by a Redis restart (with its append-only file) wait for Redis and finish.

A worker on the Redis bus and mailboxes (its records in a SQLite file), against a
`redis-server` of the test's own that is stopped while the model is answering several chats and
started again once the turns have met the outage. Each turn must show its answer once Redis is
back, without an apology
and without asking the model again (its call was paid for), and the outage is told in the
log in a line when it starts and one when it ends, without a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from core.backends.redis.bus import RedisBus
from core.backends.redis.client import connect_redis
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound, Outbound
from core.events import ModelEvent
from core.policy import ChannelPolicy
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.turns.intake import APOLOGY_TEXT
from tests.redis_server import RedisServer
from tests.workers import Outbox, build_worker, hand_in

KEYS = RedisKeys("midturn")
CHATS = 4
PATIENCE = 30.0
ANSWER = "Here is your answer."
# What the turn path says when it meets an outage (or, failing, that it failed).
TURN_LOGGERS = ("core.outages", "core.runtime", "core.worker", "core.turns")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    started = RedisServer(tmp_path / "redis", persistent=True)
    await asyncio.to_thread(started.start)
    try:
        yield started
    finally:
        await asyncio.to_thread(started.stop)


class _Log(logging.Handler):
    """Every record of the worker's parts; `noticed` is set once the turn path warns (it met
    the outage)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.noticed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if record.levelno >= logging.WARNING and _of_turns(record):
            self.noticed.set()


def _of_turns(record: logging.LogRecord) -> bool:
    """Whether `record` comes from the turn path (not from the claims' lease renewals)."""
    renewals = record.getMessage().startswith("turn lease renewals")
    return record.name.startswith(TURN_LOGGERS) and not renewals


@pytest.fixture
async def log() -> AsyncIterator[_Log]:
    handler = _Log()
    core = logging.getLogger("core")
    level = core.level
    core.addHandler(handler)
    core.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        core.removeHandler(handler)
        core.setLevel(level)


class _Gated:
    """Model answers held back until every chat has asked and the test lets them go."""

    def __init__(self) -> None:
        self.asking = 0
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def __call__(self, request: ModelRequest) -> list[ModelEvent]:
        self.asking += 1
        if self.asking == CHATS:
            self.asked.set()
        await self.answer.wait()
        return text_reply(ANSWER)


@dataclass
class _Restarted:
    """What the chats got, what the model was asked, what each session holds."""

    sent: dict[str, list[Outbound]]
    asked: int
    stored: dict[str, list[str]]


@pytest.fixture
async def restarted(server: RedisServer, log: _Log, tmp_path: Path) -> _Restarted:
    """Every chat's turn under way, Redis restarted while the model answers."""
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'records.db'}")
    # As `bots/app.py` makes it: a dropped connection (the restart) is tried again quickly.
    retry = Retry(ExponentialWithJitterBackoff(cap=0.5, base=0.05), retries=3)
    shared = connect_redis(server.url, retry=retry)
    bus = await RedisBus.connect(server.url, keys=KEYS, client=shared)
    gated = _Gated()
    # More steps, should a turn be run again: none may be.
    held: list[ScriptStep] = [gated] * CHATS
    again: list[ScriptStep] = [text_reply("asked twice")] * CHATS
    script = held + again
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry([]), store=store
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        mailboxes=RedisMailboxes(shared, keys=KEYS),
        policy=ChannelPolicy(modes={"terminal": "full"}),
    )
    outbox = Outbox(bus)
    inbounds = [
        Inbound(
            address=Address(platform="terminal", chat=f"chat-{n}"),
            text="hi",
            user_id="u",
            is_direct=True,
        )
        for n in range(CHATS)
    ]
    running = asyncio.create_task(worker.run())
    try:
        for inbound in inbounds:
            await hand_in(worker, inbound)
        await asyncio.wait_for(gated.asked.wait(), PATIENCE)

        await asyncio.to_thread(server.stop)
        gated.answer.set()  # the answers' writes and their streamed pieces meet the outage
        await asyncio.wait_for(log.noticed.wait(), PATIENCE)
        await asyncio.to_thread(server.start)

        sent = {
            i.address.chat: await asyncio.wait_for(outbox.turn_of(i), PATIENCE) for i in inbounds
        }
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
        stored: dict[str, list[str]] = {}
        for inbound in inbounds:
            session = await store.current_session(inbound.session_key)
            stored[inbound.address.chat] = [m.text for m in await store.list_messages(session.id)]
    finally:
        await asyncio.wait_for(worker.stop(grace=5.0), PATIENCE)
        await asyncio.wait_for(running, PATIENCE)
        await bus.close()
        await shared.aclose()
        await store.close()
    return _Restarted(sent, len(provider.requests), stored)


async def test_turns_caught_by_a_redis_restart_finish_without_asking_the_model_again(
    restarted: _Restarted,
) -> None:
    for chat, sent in restarted.sent.items():
        replies = [(o.text, o.failed) for o in sent if o.ends_turn]
        assert replies == [(ANSWER, False)], (chat, sent)
        assert not [o for o in sent if APOLOGY_TEXT in o.text or "went wrong" in o.text]
    assert restarted.asked == CHATS  # the model was asked once per turn
    assert restarted.stored == {chat: ["hi", ANSWER] for chat in restarted.sent}


async def test_a_redis_restart_is_logged_once_when_it_starts_and_once_when_it_ends(
    restarted: _Restarted, log: _Log
) -> None:
    assert [r.getMessage() for r in log.records if r.exc_info] == []  # no traceback
    turns = [
        (r.levelno, r.getMessage())
        for r in log.records
        if r.name == "core.outages" and _of_turns(r)
    ]
    assert [level for level, _ in turns] == [logging.WARNING, logging.INFO], turns
    assert "Redis" in turns[0][1]
