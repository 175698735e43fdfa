"""The confirmation's answer reaches the turn waiting for it on another worker (real Redis).

Two workers share a real `redis-server` (bus, store, mailboxes). Worker A takes the turn, which
asks; its intake is then held, so the answer, put on the `inbound` queue as a gateway would,
can only be taken by worker B. B passes it on the `control` topic; A's gate takes it and the
tool runs (or not). A typed "yes" also waits in the session's mailbox for A, marked processed
by A's gate, so it never becomes a turn of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis

from core.bus import EVENTS, INBOUND, outbound_queue
from core.bus.base import BusPayload, Delivery
from core.bus.redis import RedisBus
from core.confirm import Confirmations, answer_inbound, button_value
from core.envelopes import Address, EventEnvelope, Inbound, Outbound
from core.mailbox.redis import RedisMailboxes
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.redis_keys import RedisKeys
from core.runtime import AgentRuntime
from core.store.redis import RedisStore
from core.tools import ToolRegistry
from core.worker import Worker
from tests.unit.test_confirmation import script, wipe_tool
from tests.workers import build_worker

PATIENCE = 10.0
KEYS = RedisKeys("confirm")
CHAT = Address(platform="telegram", bot="b", chat="42")


class HeldIntake:
    """The real bus, except that after `taken` inbound deliveries this worker takes no more
    (its turn keeps running): the test's way to make the other worker take the answer."""

    def __init__(self, bus: RedisBus, taken: int) -> None:
        self._bus = bus
        self._left = taken

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    async def receive(
        self,
        queue: str,
        *,
        consumer: str,
        timeout: float | None = None,  # noqa: ASYNC109 - the Bus protocol's own parameter
    ) -> Delivery | None:
        if queue == INBOUND and self._left <= 0:
            await asyncio.Event().wait()  # until the worker stops and cancels it
        delivery = await self._bus.receive(queue, consumer=consumer, timeout=timeout)
        if queue == INBOUND and delivery is not None:
            self._left -= 1
        return delivery

    async def enqueue(
        self, queue: str, envelope: BusPayload, *, dedupe_id: str | None = None
    ) -> str | None:
        return await self._bus.enqueue(queue, envelope, dedupe_id=dedupe_id)


@dataclass
class Deployment:
    store: RedisStore
    gateway_bus: RedisBus
    ran: list[str]
    providers: dict[str, ScriptedProvider]
    workers: dict[str, Worker]
    # The `confirm.decision` lifecycle event, once seen.
    decided: EventEnvelope | None = None


@pytest.fixture
async def deployment(redis_url: str) -> AsyncIterator[Deployment]:
    async with AsyncExitStack() as stack:
        raw = aioredis.Redis.from_url(redis_url)
        stack.push_async_callback(raw.aclose)
        store = await RedisStore.open(redis_url, keys=KEYS)
        stack.push_async_callback(store.close)
        gateway_bus = await RedisBus.connect(redis_url, keys=KEYS)
        stack.push_async_callback(gateway_bus.close)
        found = Deployment(store, gateway_bus, [], {}, {})
        tasks: list[asyncio.Task[None]] = []
        for name in ("a", "b"):
            real = await RedisBus.connect(redis_url, keys=KEYS)
            stack.push_async_callback(real.close)
            bus: Any = HeldIntake(real, taken=1) if name == "a" else real
            gate = Confirmations(bus=bus, timeout=PATIENCE, marks=store)
            provider = found.providers[name] = ScriptedProvider(script())
            runtime = AgentRuntime(
                provider=provider,
                model="test-model",
                tools=ToolRegistry([wipe_tool(found.ran)]),
                store=store,
                confirm=gate.confirm,
            )
            worker = found.workers[name] = build_worker(
                bus=bus,
                store=store,
                runtime=runtime,
                confirmations=gate,
                policy=ChannelPolicy(modes={"telegram": "full"}),
                mailboxes=RedisMailboxes(raw, keys=KEYS, lease_seconds=30),
                name=f"worker-{name}",
                sweep_interval=0.2,
            )
            tasks.append(asyncio.create_task(worker.run()))
            if name == "a":
                # A alone is listening when the turn's message comes: it takes it.
                await gateway_bus.enqueue(INBOUND, said("wipe it"))
        try:
            yield found
        finally:
            for worker, task in zip(found.workers.values(), tasks, strict=True):
                await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
                await asyncio.wait_for(task, PATIENCE)


def said(text: str) -> Inbound:
    return Inbound(address=CHAT, user_id="7", user_name="Ann", text=text, is_direct=True)


async def outbound_until(bus: RedisBus, kind: str) -> Outbound:
    async with asyncio.timeout(PATIENCE):
        while True:
            delivery = await bus.receive(outbound_queue("telegram"), consumer="gw", timeout=1)
            if delivery is None:
                continue
            await delivery.ack()
            assert isinstance(delivery.envelope, Outbound)
            if delivery.envelope.kind == kind:
                return delivery.envelope


async def answered(deployment: Deployment, answer: Inbound | None) -> Outbound:
    """Wait for the question, send `answer` (built from the question's id), return the reply."""
    events = await deployment.gateway_bus.subscribe(EVENTS)
    question = await outbound_until(deployment.gateway_bus, "question")
    assert question.question is not None
    if answer is not None:
        if answer.kind == "answer":
            answer = answer.model_copy(update={"question": question.question})
        await deployment.gateway_bus.enqueue(INBOUND, answer)
    decision = await outbound_until(deployment.gateway_bus, "decision")
    assert decision.question == question.question
    reply = await outbound_until(deployment.gateway_bus, "reply")
    async with asyncio.timeout(PATIENCE):
        async for event in events:
            if isinstance(event, EventEnvelope) and event.name == "confirm.decision":
                deployment.decided = event
                break
    await events.aclose()
    for worker in deployment.workers.values():
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    return reply


async def users_said(deployment: Deployment) -> list[str]:
    session = await deployment.store.current_session(CHAT.session_key)
    return [m.text for m in await deployment.store.list_messages(session.id) if m.role == "user"]


async def test_a_typed_yes_taken_by_the_other_worker_lets_the_tool_run(
    deployment: Deployment,
) -> None:
    reply = await answered(deployment, said("yes"))

    assert reply.text == "Finished."
    assert deployment.ran == ["/tmp/x"]
    assert len(deployment.providers["a"].requests) == 2
    assert deployment.providers["b"].requests == []  # the yes never became a turn
    assert await users_said(deployment) == ["wipe it"]
    decided = deployment.decided
    assert decided is not None
    assert (decided.data["allowed"], decided.data["via"]) == (True, "text")


async def test_a_button_press_taken_by_the_other_worker_lets_the_tool_run(
    deployment: Deployment,
) -> None:
    pressed = answer_inbound(
        button_value("set-from-the-question", True),
        address=CHAT,
        user_id="7",
        user_name="Ann",
        press_id="cb-1",
    )

    reply = await answered(deployment, pressed)

    assert reply.text == "Finished."
    assert deployment.ran == ["/tmp/x"]
    assert deployment.providers["b"].requests == []
    decided = deployment.decided
    assert decided is not None
    assert (decided.data["allowed"], decided.data["via"]) == (True, "button")
