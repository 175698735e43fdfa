"""A turn caught by a Redis restart (with its append-only file) waits for Redis and finishes.

A worker on the Redis store, bus and mailboxes, against a `redis-server` of the test's own
that is stopped while the model is answering and started again once the turn has met the
outage. The turn must write its answer once Redis is back, without an apology and without
asking the model again (its call was paid for).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.bus import INBOUND
from core.bus.redis import RedisBus
from core.envelopes import Address, Inbound
from core.events import ModelEvent
from core.mailbox.redis import RedisMailboxes
from core.policy import ChannelPolicy
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import text_reply
from core.redis_client import BatchingRedis
from core.redis_keys import RedisKeys
from core.runtime import AgentRuntime
from core.store.redis import RedisStore
from core.tools import ToolRegistry
from core.turns.intake import APOLOGY_TEXT
from core.worker import Worker
from tests.redis_server import RedisServer
from tests.workers import Outbox, build_worker

KEYS = RedisKeys("midturn")
TERMINAL = Address(platform="terminal", chat="alice")
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


class _Noticed(logging.Handler):
    """Set once the turn path logs a warning or worse: it met the outage."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(TURN_LOGGERS):
            self.loop.call_soon_threadsafe(self.event.set)


@pytest.fixture
async def noticed() -> AsyncIterator[_Noticed]:
    handler = _Noticed()
    core = logging.getLogger("core")
    core.addHandler(handler)
    try:
        yield handler
    finally:
        core.removeHandler(handler)


class _Gated:
    """A model answer held back until the test lets it go (Redis is stopped meanwhile)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def __call__(self, request: ModelRequest) -> list[ModelEvent]:
        self.asked.set()
        await self.answer.wait()
        return text_reply(ANSWER)


async def test_a_turn_caught_by_a_redis_restart_finishes_without_asking_the_model_again(
    server: RedisServer, noticed: _Noticed
) -> None:
    store = await RedisStore.open(server.url, keys=KEYS)
    shared = store.client
    assert isinstance(shared, BatchingRedis)
    bus = await RedisBus.connect(server.url, keys=KEYS, batched=shared)
    gated = _Gated()
    # A second step, should the turn be run again: it must not be.
    provider = ScriptedProvider([gated, text_reply("asked twice")])
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry([]), store=store
    )
    worker: Worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        mailboxes=RedisMailboxes(shared, keys=KEYS),
        policy=ChannelPolicy(modes={"terminal": "full"}),
    )
    outbox = Outbox(bus)
    inbound = Inbound(address=TERMINAL, user_id="u1", text="hi", is_direct=True)
    running = asyncio.create_task(worker.run())
    try:
        await bus.enqueue(INBOUND, inbound)
        await asyncio.wait_for(gated.asked.wait(), PATIENCE)

        await asyncio.to_thread(server.stop)
        gated.answer.set()  # the answer's writes and its streamed piece meet the outage
        await asyncio.wait_for(noticed.event.wait(), PATIENCE)
        await asyncio.to_thread(server.start)

        sent = await asyncio.wait_for(outbox.turn_of(inbound), PATIENCE)
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
        session = await store.current_session(TERMINAL.session_key)
        stored = [m.text for m in await store.list_messages(session.id)]
    finally:
        await asyncio.wait_for(worker.stop(grace=5.0), PATIENCE)
        await asyncio.wait_for(running, PATIENCE)
        await bus.close()
        await store.close()

    replies = [o for o in sent if o.ends_turn]
    assert [(o.text, o.failed) for o in replies] == [(ANSWER, False)], sent
    assert not [o for o in sent if APOLOGY_TEXT in o.text or "went wrong" in o.text]
    assert len(provider.requests) == 1  # the model was asked once
    assert stored == ["hi", ANSWER]  # each written once
