"""A worker that no longer holds a session sends nothing more for it; the next claim answers.

Runs the real `Worker`, `MemoryBus`, `SqlStore` and `AgentRuntime` with a scripted provider;
the mailboxes are the in-memory ones, watched so the test can reach the claim a turn runs
under. A claim is lost the two ways production sees: its lease could not be renewed (the
claim's `lost` is set), or the store refused a write fenced with its epoch because a newer
claim wrote first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.bus import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.events import ModelEvent
from core.fencing import Fence
from core.mailbox.base import Claim
from core.messages import Message
from core.policy import ChannelPolicy
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import build_worker, hand_in

PATIENCE = 5.0
TERMINAL = Address(platform="terminal", chat="alice")


class WatchedMailboxes(MemoryMailboxes):
    """In-memory mailboxes that keep every claim they granted, for the test to reach."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[Claim] = []

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        granted = await super().claim(session_key, owner=owner)
        if granted is not None:
            self.claims.append(granted)
        return granted


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus(lease_seconds=300.0)
    try:
        yield opened
    finally:
        await opened.close()


def make_worker(
    bus: MemoryBus, store: SqlStore, mailboxes: MemoryMailboxes, script: list[ScriptStep]
) -> Worker:
    runtime = AgentRuntime(
        provider=ScriptedProvider(script), model="test-model", tools=ToolRegistry([]), store=store
    )
    return build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        mailboxes=mailboxes,
        policy=ChannelPolicy(modes={"terminal": "full"}),
        prompt_hints={"terminal": "Plain text only."},
    )


async def finals_of(bus: MemoryBus, inbound: Inbound, worker: Worker) -> list[Outbound]:
    """Everything sent about `inbound` once the worker is idle, final ones only."""
    await worker.idle.wait()
    seen: list[Outbound] = []
    queue = outbound_queue("terminal")
    while (delivery := await bus.receive(queue, consumer="test", timeout=0)) is not None:
        await delivery.ack()
        assert isinstance(delivery.envelope, Outbound)
        seen.append(delivery.envelope)
    return [o for o in seen if o.reply_to == inbound.id and o.kind in ("reply", "notice")]


async def run_until_idle(worker: Worker, bus: MemoryBus, inbound: Inbound) -> None:
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, inbound)
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)


async def test_a_claim_lost_mid_turn_sends_no_cancelled_notice_and_the_next_claim_answers(
    bus: MemoryBus, store: SqlStore
) -> None:
    mailboxes = WatchedMailboxes()
    asked, stopped = asyncio.Event(), asyncio.Event()
    retried = asyncio.Event()

    async def stalls(_request: ModelRequest) -> list[ModelEvent]:
        asked.set()
        try:
            await asyncio.Event().wait()  # the model call in flight when the lease goes
        except asyncio.CancelledError:
            stopped.set()
            raise
        return text_reply("unreachable")

    async def answers(_request: ModelRequest) -> list[ModelEvent]:
        retried.set()
        return text_reply("the answer")

    worker = make_worker(bus, store, mailboxes, [stalls, answers])
    inbound = Inbound(address=TERMINAL, user_id="u1", text="hello", is_direct=True)
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, inbound)
        await asyncio.wait_for(asked.wait(), PATIENCE)
        first = mailboxes.claims[0]
        first.lost.set()  # its lease could not be renewed in time
        await asyncio.wait_for(retried.wait(), PATIENCE)
        finals = await asyncio.wait_for(finals_of(bus, inbound, worker), PATIENCE)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    assert stopped.is_set()
    assert [(o.kind, o.text) for o in finals] == [("reply", "the answer")]
    assert len(mailboxes.claims) == 2
    assert await mailboxes.pending() == []


async def test_a_write_refused_by_the_fence_ends_the_turn_silently(
    bus: MemoryBus, store: SqlStore
) -> None:
    mailboxes = WatchedMailboxes()

    async def overtaken(_request: ModelRequest) -> list[ModelEvent]:
        # Meanwhile another worker claimed the session and stored the answer: this turn's
        # own write of its answer is refused.
        first = mailboxes.claims[0]
        session = await store.current_session(first.session_key)
        newer = Fence(session_key=first.session_key, epoch=first.fence.epoch + 1)
        await store.append_message(
            session.id, Message.assistant("from the new holder"), fence=newer
        )
        return text_reply("from the stale holder")

    worker = make_worker(bus, store, mailboxes, [overtaken, text_reply("unused")])
    inbound = Inbound(address=TERMINAL, user_id="u1", text="hello", is_direct=True)
    await run_until_idle(worker, bus, inbound)
    finals = await finals_of(bus, inbound, worker)

    # No error reply and no apology from the stale turn; the next claim delivers what the
    # new holder stored.
    assert [(o.kind, o.text, o.failed) for o in finals] == [("reply", "from the new holder", False)]
    texts = [m.text for m in await store.list_messages((await store.list_sessions())[0].id)]
    assert "from the stale holder" not in texts
