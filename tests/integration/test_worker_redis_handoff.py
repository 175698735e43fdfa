"""The worker on the Redis bus and mailboxes: a message that lands while the previous one is
handled, just before the worker takes that one out of the mailbox (and may release the claim
with it), is answered at once, not left for the sweep.

Against the test's real `redis-server`. The sweep runs every minute here, so only the worker's
own wake can pick the second message up within the test's patience.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from core.backends.redis.bus import RedisBus
from core.backends.redis.client import redis_client
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore, sqlite_url
from core.envelopes import Address, Inbound
from core.fencing import Fence
from core.readiness import Readiness
from core.turns.intake import InboundHandler
from core.worker import Worker
from tests.workers import hand_in

KEYS = RedisKeys("handoff")
CHAT = Address(platform="telegram", bot="bot", chat="42")
PATIENCE = 10.0


def said(text: str) -> Inbound:
    return Inbound(address=CHAT, user_id="42", text=text, is_direct=True)


class _PutsWhileHandling:
    """Handles the first message by putting a second one in its session's mailbox; the worker
    takes the first out once its handling returned."""

    def __init__(self, mailboxes: RedisMailboxes) -> None:
        self.mailboxes = mailboxes
        self.handled: list[str] = []
        self.second = asyncio.Event()

    async def handle(
        self,
        inbound: Inbound,
        *,
        cancel: asyncio.Event,
        fence: Fence | None = None,
        claim: object = None,
    ) -> None:
        self.handled.append(inbound.text)
        if inbound.text == "first":
            await self.mailboxes.put(said("second"))
        else:
            self.second.set()

    async def apologize(self, inbound: Inbound) -> None:
        raise AssertionError("nothing fails here")

    async def abandon(self, inbound: Inbound) -> None:
        raise AssertionError("no crash policy")


async def test_work_put_while_the_last_item_is_handled_is_answered_without_the_sweep(
    redis_url: str, tmp_path: Path
) -> None:
    shared = redis_client(redis_url)
    bus = await RedisBus.connect(redis_url, keys=KEYS)
    store = await SqlStore.open(sqlite_url(tmp_path / "switchboard.db"))
    mailboxes = RedisMailboxes(shared, keys=KEYS)
    handler = _PutsWhileHandling(mailboxes)
    worker = Worker(
        bus=bus,
        store=store,
        mailboxes=mailboxes,
        handler=cast(InboundHandler, handler),
        confirmations=None,
        on_crash=None,
        readiness=Readiness(),
        sweep_interval=60.0,
    )
    running = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, said("first"))
        await asyncio.wait_for(handler.second.wait(), PATIENCE)
        assert handler.handled == ["first", "second"]
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(running, PATIENCE)
        await bus.close()
        await store.close()
        await shared.aclose()
