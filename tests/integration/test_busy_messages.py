"""Messages while busy (`busy = "steer" | "collect" | "queue"`) through a real worker, on the
embedded parts (SQLite mailboxes and store) and the distributed ones (Redis mailboxes and
bus, PostgreSQL).

The model's first call waits until the test lets it go, then asks for a tool; every later
call answers with what the person said since the last answer, so a test reads from the reply
which messages the turn saw.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.mailboxes import SqliteMailboxes
from core.backends.sql.store import SqlStore, sqlite_url
from core.bus.base import Bus
from core.envelopes import Address, Inbound, Outbound, Transcription
from core.events import Finished, TextDelta
from core.mailbox.base import Claim, Mailboxes
from core.mailbox.intake import accept_inbound
from core.messages import ToolCall
from core.policy import ChannelPolicy
from core.providers.base import ModelRequest
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker

PATIENCE = 10.0
CHAT = Address(platform="terminal", chat="alice")


def said(text: str, user_id: str = "u1") -> Inbound:
    return Inbound(address=CHAT, user_id=user_id, user_name="Alice", text=text, is_direct=True)


class HeldModel:
    """First call: waits for `go`, then asks for a tool (so the turn calls the model again).
    Later calls: `Saw: <what the person said since the last answer, joined by " | ">`."""

    def __init__(self, *, tool_first: bool = True) -> None:
        self.calls = 0
        self.asked = asyncio.Event()
        self.go = asyncio.Event()
        self.tool_first = tool_first

    @property
    def name(self) -> str:
        return "held"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.asked.set()
            await self.go.wait()
            if self.tool_first:
                yield ToolCall(id="c1", name="look_around", arguments={})
                yield Finished(stop_reason="tool_use")
                return
        newest: list[str] = []
        for message in reversed(request.messages):
            if message.role == "assistant":
                break
            if message.role == "user":
                newest.insert(0, message.text)
        yield TextDelta(text="Saw: " + " | ".join(newest))
        yield Finished(stop_reason="end_turn")


@dataclass
class Parts:
    bus: Bus
    store: SqlStore
    mailboxes: Mailboxes


@pytest.fixture(params=["sqlite", "redis"])
async def parts(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Parts]:
    async with AsyncExitStack() as stack:
        if request.param == "sqlite":
            store = await SqlStore.open(sqlite_url(tmp_path / "switchboard.db"))
            stack.push_async_callback(store.close)
            sqlite = await SqliteMailboxes.open(tmp_path / "queues.db")
            stack.push_async_callback(sqlite.aclose)
            memory = MemoryBus()
            stack.push_async_callback(memory.close)
            yield Parts(memory, store, sqlite)
        else:
            # Sync fixtures only (async ones cannot be asked for here); a namespace of its own.
            redis_url = request.getfixturevalue("redis_server").url
            postgres = request.getfixturevalue("postgres_server")
            store = await SqlStore.open(await postgres.new_database())
            stack.push_async_callback(store.close)
            keys = RedisKeys(f"t{uuid.uuid4().hex[:12]}")
            bus = await RedisBus.connect(redis_url, keys=keys)
            stack.push_async_callback(bus.close)
            redis = RedisMailboxes.from_url(redis_url, keys=keys)
            stack.push_async_callback(redis.aclose)
            yield Parts(bus, store, redis)


def worker_of(
    parts: Parts, model: HeldModel, busy: str, mailboxes: Mailboxes | None = None
) -> Worker:
    runtime = AgentRuntime(
        provider=model, model="test-model", tools=ToolRegistry([]), store=parts.store
    )
    return build_worker(
        bus=parts.bus,
        store=parts.store,
        runtime=runtime,
        mailboxes=mailboxes or parts.mailboxes,
        policy=ChannelPolicy(modes={"terminal": "safe-chat"}),
        busy=busy,
        pause=_no_pause,
        sweep_interval=0.2,
    )


async def _no_pause(seconds: float) -> None:
    """`collect`'s wait: the messages are in the mailbox already, nothing to wait for."""


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)


async def user_texts(store: SqlStore) -> list[str]:
    session = await store.find_current_session(said("").session_key)
    assert session is not None
    return [m.text for m in await store.list_messages(session.id) if m.role == "user"]


async def replies(outbox: Outbox, count: int) -> list[Outbound]:
    async with asyncio.timeout(PATIENCE):
        while len(found := [o for o in outbox.seen if o.kind == "reply"]) < count:
            await outbox.next()
    return found


async def test_messages_sent_during_a_turn_join_it_and_get_one_answer(parts: Parts) -> None:
    model = HeldModel()
    outbox = Outbox(parts.bus)
    async with running(worker_of(parts, model, "steer")):
        heard = [Transcription(model="whisper-1", seconds=30, cost_usd=0.003)]
        first = said("first")
        second = said("second").model_copy(update={"transcriptions": heard})
        third = said("third")
        await hand_in_to(parts, first)
        await asyncio.wait_for(model.asked.wait(), PATIENCE)
        await hand_in_to(parts, second, third)
        model.go.set()
        (reply,) = await replies(outbox, 1)
        assert reply.reply_to == first.id
        # The tool's result came back, then the two messages joined before the next call.
        assert reply.text == "Saw: second | third"
    # Stopping lets the turn finish: every message is out of the mailbox by now.
    assert await parts.mailboxes.waiting() == 0
    assert model.calls == 2
    assert await user_texts(parts.store) == ["first", "second", "third"]
    for inbound in (first, second, third):
        assert await parts.store.is_processed(inbound.dedupe_key)
    assert [o for o in outbox.seen if o.kind == "reply"] == [reply]
    # The voice note that joined the turn is charged to the session, as its sender's.
    session = await parts.store.find_current_session(CHAT.session_key)
    assert session is not None
    voice = [e for e in await parts.store.cost_entries(session.id) if e.provider == "voice"]
    assert [(e.cost_usd, e.user) for e in voice] == [(0.003, "terminal:u1")]


async def test_queue_answers_each_message_in_a_turn_of_its_own(parts: Parts) -> None:
    model = HeldModel()
    outbox = Outbox(parts.bus)
    async with running(worker_of(parts, model, "queue")):
        first, second = said("first"), said("second")
        await hand_in_to(parts, first)
        await asyncio.wait_for(model.asked.wait(), PATIENCE)
        await hand_in_to(parts, second)
        model.go.set()
        answered = await replies(outbox, 2)
    assert [(o.reply_to, o.text) for o in answered] == [
        (first.id, "Saw: "),
        (second.id, "Saw: second"),
    ]


async def test_an_answer_already_given_leaves_the_message_its_own_turn(parts: Parts) -> None:
    # The model's first call is its final answer: no further call to join.
    model = HeldModel(tool_first=False)
    outbox = Outbox(parts.bus)
    async with running(worker_of(parts, model, "steer")):
        first, second = said("first"), said("second")
        await hand_in_to(parts, first)
        await asyncio.wait_for(model.asked.wait(), PATIENCE)
        await hand_in_to(parts, second)
        model.go.set()
        answered = await replies(outbox, 2)
    assert [(o.reply_to, o.text) for o in answered] == [
        (first.id, "Saw: first"),
        (second.id, "Saw: second"),
    ]


async def test_another_persons_message_and_a_command_keep_their_place(parts: Parts) -> None:
    model = HeldModel()
    outbox = Outbox(parts.bus)
    async with running(worker_of(parts, model, "steer")):
        first, mine, theirs, after = (
            said("first"),
            said("mine"),
            said("theirs", "u2"),
            said("after"),
        )
        await hand_in_to(parts, first)
        await asyncio.wait_for(model.asked.wait(), PATIENCE)
        await hand_in_to(parts, mine, theirs, after)
        model.go.set()
        answered = await replies(outbox, 3)
    assert [(o.reply_to, o.text) for o in answered] == [
        (first.id, "Saw: mine"),
        (theirs.id, "Saw: theirs"),
        (after.id, "Saw: after"),
    ]


async def test_collect_answers_what_came_in_its_window_in_one_turn(parts: Parts) -> None:
    # No tool call: "collect" joins before the first call, so one call answers all three.
    model = HeldModel(tool_first=False)
    model.go.set()
    outbox = Outbox(parts.bus)
    first, second, third = said("first"), said("second"), said("third")
    # In the mailboxes before the worker starts: the window's wait (no real pause) finds them.
    await hand_in_to(parts, first, second, third)
    async with running(worker_of(parts, model, "collect")):
        (reply,) = await replies(outbox, 1)
    assert reply.reply_to == first.id
    assert reply.text == "Saw: first | second | third"
    assert model.calls == 1


class _Crashing:
    """Mailboxes whose claims never take a joined message out: the process dies there (the
    `done` hangs until the worker is stopped, which cancels it)."""

    def __init__(self, inner: Mailboxes) -> None:
        self.inner = inner
        self.hung = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        claim = await self.inner.claim(session_key, owner=owner)
        return None if claim is None else _CrashingClaim(claim, self.hung)


class _CrashingClaim:
    def __init__(self, inner: Claim, hung: asyncio.Event) -> None:
        self.inner = inner
        self.hung = hung
        self.head_id = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def head(self) -> Inbound | None:
        found = await self.inner.head()
        self.head_id = found.id if found is not None else ""
        return found

    async def done(self, inbound: Inbound) -> None:
        if inbound.id != self.head_id:
            self.hung.set()
            await asyncio.Event().wait()
        await self.inner.done(inbound)


async def test_a_crash_between_join_and_removal_loses_nothing_and_doubles_nothing(
    parts: Parts,
) -> None:
    model = HeldModel()
    crashing = _Crashing(parts.mailboxes)
    first, second = said("first"), said("second")
    crashed = worker_of(parts, model, "steer", mailboxes=crashing)
    task = asyncio.create_task(crashed.run())
    await hand_in_to(parts, first)
    await asyncio.wait_for(model.asked.wait(), PATIENCE)
    await hand_in_to(parts, second)
    model.go.set()
    await asyncio.wait_for(crashing.hung.wait(), PATIENCE)
    # Killed there: no grace, the turn is cancelled where it hangs.
    await asyncio.wait_for(crashed.stop(grace=0), PATIENCE)
    await asyncio.wait_for(task, PATIENCE)
    # Stopped between the join (stored and marked) and the removal: both still wait.
    assert await parts.store.is_processed(second.dedupe_key)
    assert not await parts.store.is_processed(first.dedupe_key)
    assert await parts.mailboxes.waiting() == 2

    # The next worker takes both again: the first's turn goes on from what was stored (the
    # joined message with it), the second's redelivery is skipped.
    again = HeldModel(tool_first=False)
    again.go.set()
    outbox = Outbox(parts.bus)
    async with running(worker_of(parts, again, "steer")):
        (reply,) = await replies(outbox, 1)
    assert await parts.mailboxes.waiting() == 0
    assert reply.reply_to == first.id
    assert reply.text == "Saw: second"  # what was said since the tool's result
    assert await user_texts(parts.store) == ["first", "second"]
    assert again.calls == 1
    assert await outbox.rest() == []


async def hand_in_to(parts: Parts, *inbounds: Inbound) -> None:
    """As a gateway hands them in."""
    for inbound in inbounds:
        await accept_inbound(inbound, mailboxes=parts.mailboxes, bus=parts.bus)
