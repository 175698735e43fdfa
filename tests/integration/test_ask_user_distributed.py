"""The `ask_user` answer reaches the turn waiting for it on another worker (real Redis).

Two workers share a real `redis-server` (bus, mailboxes) and PostgreSQL (records). Worker A
takes the turn, whose `ask_user` call asks; worker B starts then. The answer, handed in as a
gateway does (`accept_inbound`), goes into the session's mailbox only, behind the turn's
message; A holds that mailbox's claim and finds it there, marks it processed and takes it
out, so it never becomes a turn, on A or on B.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.confirm import Confirmations
from core.envelopes import Address, Inbound, Outbound
from core.mailbox.intake import accept_inbound
from core.messages import ToolCall
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.tools.ask_user import ASK_USER, ask_user_tool
from core.worker import Worker
from tests.workers import build_worker

PATIENCE = 10.0
KEYS = RedisKeys("askuser")
CHAT = Address(platform="telegram", bot="b", chat="42")
ASKER = "7"
QUESTION = "Which colour should the logo be?"


@dataclass
class Deployment:
    store: SqlStore
    gateway_bus: RedisBus
    gateway_mailboxes: RedisMailboxes
    providers: dict[str, ScriptedProvider] = field(default_factory=dict)
    workers: dict[str, Worker] = field(default_factory=dict)


def said(text: str) -> Inbound:
    return Inbound(address=CHAT, user_id=ASKER, user_name="Ann", text=text, is_direct=True)


async def hand_in(deployment: Deployment, inbound: Inbound) -> None:
    """Hand `inbound` in as a gateway does."""
    await accept_inbound(
        inbound, mailboxes=deployment.gateway_mailboxes, bus=deployment.gateway_bus
    )


async def outbound_until(bus: RedisBus, kind: str, text: str) -> Outbound:
    async with asyncio.timeout(PATIENCE):
        while True:
            delivery = await bus.receive(outbound_queue("telegram"), consumer="gw", timeout=1)
            if delivery is None:
                continue
            await delivery.ack()
            envelope = delivery.envelope
            assert isinstance(envelope, Outbound)
            if envelope.kind == kind and text in envelope.text:
                return envelope


@asynccontextmanager
async def deployment(redis_url: str, database_url: str) -> AsyncIterator[Deployment]:
    """Workers A and B on Redis and `database_url`; yields once A's turn has asked."""
    async with AsyncExitStack() as stack:
        raw = aioredis.Redis.from_url(redis_url)
        stack.push_async_callback(raw.aclose)
        store = await SqlStore.open(database_url)
        stack.push_async_callback(store.close)
        gateway_bus = await RedisBus.connect(redis_url, keys=KEYS)
        stack.push_async_callback(gateway_bus.close)
        found = Deployment(store, gateway_bus, RedisMailboxes(raw, keys=KEYS))
        tasks: list[asyncio.Task[None]] = []
        for name in ("a", "b"):
            bus = await RedisBus.connect(redis_url, keys=KEYS)
            stack.push_async_callback(bus.close)
            gate = Confirmations(bus=bus, timeout=PATIENCE, marks=store)
            provider = found.providers[name] = ScriptedProvider(
                [
                    tool_reply(ToolCall(id="c1", name=ASK_USER, arguments={"question": QUESTION})),
                    text_reply("A blue logo it is."),
                ]
            )
            runtime = AgentRuntime(
                provider=provider,
                model="test-model",
                tools=ToolRegistry([ask_user_tool(gate, timeout=PATIENCE)]),
                store=store,
                confirm=gate.confirm,
            )
            worker = found.workers[name] = build_worker(
                bus=bus,
                store=store,
                runtime=runtime,
                confirmations=gate,
                policy=ChannelPolicy(
                    modes={"telegram": "safe-chat"}, admins=frozenset({f"telegram:{ASKER}"})
                ),
                mailboxes=RedisMailboxes(raw, keys=KEYS, lease_seconds=30),
                name=f"worker-{name}",
                sweep_interval=0.2,
            )
            tasks.append(asyncio.create_task(worker.run()))
            if name == "a":
                # A alone is listening when the turn's message comes: it takes it and asks.
                await hand_in(found, said("make me a logo"))
                await outbound_until(gateway_bus, "question", QUESTION)
        try:
            yield found
        finally:
            for worker, task in zip(found.workers.values(), tasks, strict=True):
                await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
                await asyncio.wait_for(task, PATIENCE)


async def test_the_answer_reaches_the_worker_whose_turn_waits(
    redis_url: str, postgres_url: str
) -> None:
    async with deployment(redis_url, postgres_url) as found:
        answer = said("Blue")
        await hand_in(found, answer)
        await outbound_until(found.gateway_bus, "reply", "A blue logo it is.")
        for worker in found.workers.values():
            await asyncio.wait_for(worker.idle.wait(), PATIENCE)
        # The session's mailbox is empty: the answer's copy was taken out, not left behind.
        assert await found.gateway_mailboxes.pending() == []
        session = await found.store.current_session(CHAT.session_key)
        messages = await found.store.list_messages(session.id)
        processed = await found.store.is_processed(answer.dedupe_key)

    assert [m.text for m in messages if m.role == "user"] == ["make me a logo"]
    assert len(found.providers["a"].requests) == 2
    assert found.providers["a"].requests[1].messages[-1].text == "Ann answered: Blue"
    assert found.providers["b"].requests == []  # the answer never became a turn
    assert processed
