"""`/stop` reaches the turn running on another worker (real Redis, PostgreSQL).

Workers A and B share a real `redis-server` (bus, mailboxes) and PostgreSQL (records). A takes
the turn, whose model goes on writing; B starts then. The `/stop` a gateway hands in goes on
the `control` topic, which both hear, and into the session's mailbox; A stops its turn, which
ends as stopped with its text kept, and the next message is answered as usual (the `/stop`
waiting in the mailbox behind the turn is skipped, not answered "nothing to stop").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import redis.asyncio as aioredis

from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.mailbox.intake import accept_inbound
from core.runtime import AgentRuntime
from core.stopping import STOPPED
from core.tools import ToolRegistry
from tests.integration.stopping import OPENING, EndlessProvider
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


class _Gateway:
    """What a gateway uses: the bus (outbound queues, topics) and the mailboxes."""

    def __init__(self, bus: RedisBus, mailboxes: RedisMailboxes) -> None:
        self.bus = bus
        self.mailboxes = mailboxes

    async def hand_in(self, inbound: Inbound) -> None:
        await accept_inbound(inbound, mailboxes=self.mailboxes, bus=self.bus)


@asynccontextmanager
async def two_workers(
    redis_url: str, database_url: str, providers: dict[str, EndlessProvider]
) -> AsyncIterator[_Gateway]:
    """Workers A and B (started once A has begun its turn on "tell me a long story"); yields
    what a gateway uses."""
    async with AsyncExitStack() as stack:
        raw = aioredis.Redis.from_url(redis_url)
        stack.push_async_callback(raw.aclose)
        store = await SqlStore.open(database_url)
        stack.push_async_callback(store.close)
        gateway_bus = await RedisBus.connect(redis_url, keys=KEYS)
        stack.push_async_callback(gateway_bus.close)
        gateway = _Gateway(gateway_bus, RedisMailboxes(raw, keys=KEYS))
        workers = []
        for name in ("a", "b"):
            bus = await RedisBus.connect(redis_url, keys=KEYS)
            stack.push_async_callback(bus.close)
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
                await gateway.hand_in(said("tell me a long story"))
                await outbound_until(gateway_bus, [], "delta", OPENING)
        try:
            yield gateway
        finally:
            for worker, task in workers:
                await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
                await asyncio.wait_for(task, PATIENCE)


async def test_a_stop_heard_on_the_control_topic_stops_the_turn_on_its_worker(
    redis_url: str, postgres_url: str
) -> None:
    providers = {"a": EndlessProvider(), "b": EndlessProvider()}
    seen: list[Outbound] = []
    async with two_workers(redis_url, postgres_url, providers) as gateway:
        stop = Inbound(kind="command", command="stop", text="/stop", address=CHAT, user_id=ASKER)
        await gateway.hand_in(stop)

        ended = await outbound_until(gateway.bus, seen, "notice", "— stopped")
        assert ended.text.startswith(OPENING)
        await outbound_until(gateway.bus, seen, "notice", STOPPED)
        await gateway.hand_in(said("and now?"))
        await outbound_until(gateway.bus, seen, "reply", "You said: and now?")

    assert providers["a"].cancelled.is_set()
    # The stopped turn (A's), then the next message (on whichever worker claims the session).
    assert providers["a"].calls + providers["b"].calls == 2
    assert not [o for o in seen if "Nothing to stop" in o.text]
