"""`/stop` reaches the turn running on another worker (real Redis, PostgreSQL).

Workers A and B share a real `redis-server` (bus, mailboxes) and PostgreSQL (records). A takes
the turn, whose model goes on writing; A's intake is then held, so the `/stop` a gateway puts on
the `inbound` queue can only be taken by B. B passes it on the `control` topic; A stops its
turn, which ends as stopped with its text kept, and answers the next message as usual (the
`/stop` waiting in the mailbox behind the turn is skipped, not answered "nothing to stop").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import redis.asyncio as aioredis

from core.bus import INBOUND, outbound_queue
from core.bus.redis import RedisBus
from core.envelopes import Address, Inbound, Outbound
from core.mailbox.redis import RedisMailboxes
from core.redis_keys import RedisKeys
from core.runtime import AgentRuntime
from core.stopping import STOPPED
from core.store.sql import SqlStore
from core.tools import ToolRegistry
from tests.integration.stopping import OPENING, EndlessProvider
from tests.integration.test_confirm_distributed import HeldIntake
from tests.workers import build_worker

PATIENCE = 10.0
KEYS = RedisKeys("stop")
CHAT = Address(platform="telegram", bot="b", chat="42")
ASKER = "7"


def said(text: str) -> Inbound:
    return Inbound(address=CHAT, user_id=ASKER, user_name="Ann", text=text, is_direct=True)


async def outbound_until(bus: RedisBus, seen: list[Outbound], kind: str, text: str) -> Outbound:
    """The first delivery of `kind` containing `text` (kept in `seen`, with all before it)."""
    async with asyncio.timeout(PATIENCE):
        while True:
            found = [o for o in seen if o.kind == kind and text in o.text]
            if found:
                return found[0]
            delivery = await bus.receive(outbound_queue("telegram"), consumer="gw", timeout=1)
            if delivery is None:
                continue
            await delivery.ack()
            assert isinstance(delivery.envelope, Outbound)
            seen.append(delivery.envelope)


@asynccontextmanager
async def two_workers(
    redis_url: str, database_url: str, providers: dict[str, EndlessProvider]
) -> AsyncIterator[RedisBus]:
    """Workers A (taking one inbound delivery, then no more) and B; yields the gateway's bus
    once A has started its turn on "tell me a long story"."""
    async with AsyncExitStack() as stack:
        raw = aioredis.Redis.from_url(redis_url)
        stack.push_async_callback(raw.aclose)
        store = await SqlStore.open(database_url)
        stack.push_async_callback(store.close)
        gateway_bus = await RedisBus.connect(redis_url, keys=KEYS)
        stack.push_async_callback(gateway_bus.close)
        workers = []
        for name in ("a", "b"):
            real = await RedisBus.connect(redis_url, keys=KEYS)
            stack.push_async_callback(real.close)
            bus: Any = HeldIntake(real, taken=1) if name == "a" else real
            runtime = AgentRuntime(
                provider=providers[name], model="test-model", tools=ToolRegistry([]), store=store
            )
            worker = build_worker(
                bus=bus,
                store=store,
                runtime=runtime,
                mailboxes=RedisMailboxes(raw, keys=KEYS, lease_seconds=30),
                name=f"worker-{name}",
                sweep_interval=0.2,
            )
            workers.append((worker, asyncio.create_task(worker.run())))
            if name == "a":
                # A alone is listening when the turn's message comes.
                await gateway_bus.enqueue(INBOUND, said("tell me a long story"))
        try:
            yield gateway_bus
        finally:
            for worker, task in workers:
                await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
                await asyncio.wait_for(task, PATIENCE)


async def test_a_stop_taken_by_the_other_worker_stops_the_turn(
    redis_url: str, postgres_url: str
) -> None:
    providers = {"a": EndlessProvider(), "b": EndlessProvider()}
    seen: list[Outbound] = []
    async with two_workers(redis_url, postgres_url, providers) as gateway:
        await outbound_until(gateway, seen, "delta", OPENING)

        stop = Inbound(kind="command", command="stop", text="/stop", address=CHAT, user_id=ASKER)
        await gateway.enqueue(INBOUND, stop)

        ended = await outbound_until(gateway, seen, "notice", "— stopped")
        assert ended.text.startswith(OPENING)
        await outbound_until(gateway, seen, "notice", STOPPED)
        await gateway.enqueue(INBOUND, said("and now?"))
        await outbound_until(gateway, seen, "reply", "You said: and now?")

    assert providers["a"].cancelled.is_set()
    assert providers["a"].calls == 2  # the stopped turn, then the next message
    assert providers["b"].calls == 0
    assert not [o for o in seen if "Nothing to stop" in o.text]
