"""`Worker`: inbound work off the bus, one turn at a time per session, answers on outbound.

Runs against the real `MemoryBus`, `SqlStore` and `AgentRuntime`, with a scripted provider.
The bus's lease clock is a fake: advancing it past the lease shows whether a delivery was acked
(an unacked one is given out again), without waiting for time to pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest
from limits.aio.storage import MemoryStorage
from pydantic import BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine

from core.backends.sql.store import SqlStore, sqlite_url
from core.bus import EVENTS
from core.commands import CommandRegistry, builtin_commands
from core.envelopes import Address, EventEnvelope, Inbound, Outbound
from core.errors import BusError, ChannelError, ProviderError, StoreError
from core.events import Finished, ModelEvent, TextDelta
from core.fencing import Fence
from core.mailbox.base import Claim
from core.messages import ToolCall, Usage
from core.outages import OUTAGE_BUDGET, Patience
from core.policy import ChannelPolicy, PlatformAccess
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.ratelimit import RateLimits, RateLimitSettings
from core.readiness import Readiness
from core.runtime import MODEL_UNAVAILABLE, AgentRuntime
from core.store.turns import TurnStanding
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry, builtin_tools
from core.turns import StreamPolicy
from core.turns.intake import InboundHandler
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import Outbox, build_worker, hand_in

HELP_TEXT = CommandRegistry(builtin_commands()).help_text()

# How long a test waits for something that should happen at once before it fails instead of
# hanging; only reached when the behaviour under test is broken.
PATIENCE = 5.0
LEASE = 300.0

TERMINAL = Address(platform="terminal", chat="alice")


class LeaseClock:
    """The bus's lease clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def pass_lease(self) -> None:
        self.now += LEASE * 2


@pytest.fixture
def clock() -> LeaseClock:
    return LeaseClock()


@pytest.fixture
async def bus(clock: LeaseClock) -> AsyncIterator[MemoryBus]:
    opened = MemoryBus(lease_seconds=LEASE, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


class NoArgs(BaseModel):
    """A tool that takes no arguments."""


def make_worker(
    bus: MemoryBus,
    store: SqlStore,
    script: Iterable[ScriptStep],
    *,
    tools: Iterable[Tool[Any]] = (),
    **options: Any,
) -> tuple[Worker, ScriptedProvider]:
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry(tools), store=store
    )
    options.setdefault("prompt_hints", {"terminal": "Plain text only."})
    options.setdefault("policy", ChannelPolicy(modes={"terminal": "full"}))
    return build_worker(bus=bus, store=store, runtime=runtime, **options), provider


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """The worker taking work for the duration of the block, stopped promptly afterwards."""
    task = asyncio.create_task(worker.run())
    try:
        yield task
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)


def message(
    text: str, address: Address = TERMINAL, *, platform_message_id: str | None = None
) -> Inbound:
    return Inbound(
        address=address,
        user_id="u1",
        user_name="Alice",
        text=text,
        is_direct=True,
        platform_message_id=platform_message_id,
    )


def command(word: str, address: Address = TERMINAL) -> Inbound:
    return Inbound(kind="command", address=address, user_id="u1", text=f"/{word}", command=word)


def routed(routes: dict[str, Callable[[ModelRequest], Awaitable[list[ModelEvent]]]]) -> ScriptStep:
    """A script step answering by the text of the latest user message."""

    async def answer(request: ModelRequest) -> list[ModelEvent]:
        latest = next(m for m in reversed(request.messages) if m.role == "user")
        return await routes[latest.text](request)

    return answer


# --- one message ---------------------------------------------------------------------------


async def test_a_message_gets_typing_then_a_reply_and_its_delivery_is_acked(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    worker, provider = make_worker(bus, store, [text_reply("Hello Alice!")])
    outbox = Outbox(bus)
    inbound = message("hi", platform_message_id="m-1")

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)
        await worker.idle.wait()

    assert [(o.kind, o.text) for o in sent] == [
        ("typing", ""),
        ("delta", "Hello Alice!"),
        ("reply", "Hello Alice!"),
    ]
    reply = sent[-1]
    assert (reply.reply_to, reply.reply_to_platform_id, reply.failed) == (inbound.id, "m-1", False)
    assert reply.address == TERMINAL
    assert await worker.mailboxes.waiting() == 0
    assert await store.is_processed(inbound.dedupe_key)
    request = provider.requests[0]
    assert [m.text for m in request.messages] == ["hi"]
    assert "Plain text only." in request.system
    session = await store.current_session(TERMINAL.session_key)
    assert [m.text for m in await store.list_messages(session.id)] == ["hi", "Hello Alice!"]


async def test_tool_activity_is_shown_as_progress_before_the_reply(
    bus: MemoryBus, store: SqlStore
) -> None:
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})),
        text_reply("42"),
    ]
    # Pieces at most once a minute: after the progress note, "42" waits for the pace…
    worker, _ = make_worker(bus, store, script, tools=builtin_tools(), stream_interval=60.0)
    outbox = Outbox(bus)
    inbound = message("6*7?")

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)

    # …and the final text carries it: no piece is sent for what the final text shows.
    assert [(o.kind, o.text) for o in sent] == [
        ("typing", ""),
        ("progress", "calculator(expression='6*7')"),
        ("reply", "42"),
    ]
    assert sent[-1].seq > 0 and {o.reply_key for o in sent} == {inbound.dedupe_key}


async def test_progress_is_not_queued_for_a_platform_that_does_not_show_it(
    bus: MemoryBus, store: SqlStore
) -> None:
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})),
        text_reply("42"),
    ]
    streaming = {"terminal": StreamPolicy(interval=0.0, shows_progress=False)}
    worker, _ = make_worker(bus, store, script, tools=builtin_tools(), streaming=streaming)
    outbox = Outbox(bus)
    inbound = message("6*7?")

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)

    assert [(o.kind, o.text) for o in sent] == [("typing", ""), ("delta", "42"), ("reply", "42")]


async def test_streamed_pieces_carry_the_whole_text_so_far_in_order(
    bus: MemoryBus, store: SqlStore
) -> None:
    streaming = {"terminal": StreamPolicy(interval=0.0, shows_progress=True)}
    worker, _ = make_worker(
        bus,
        store,
        [[*(TextDelta(text=t) for t in ("Hello ", "there, ", "Alice.")), Finished()]],
        streaming=streaming,
    )
    outbox = Outbox(bus)
    inbound = message("hi")

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)

    pieces = [(o.text, o.seq) for o in sent if o.kind == "delta"]
    assert pieces == [("Hello ", 1), ("Hello there, ", 2), ("Hello there, Alice.", 3)]
    assert (sent[-1].kind, sent[-1].text, sent[-1].seq) == ("reply", "Hello there, Alice.", 4)


class _Screen:
    """A platform shown by the test's own process: keeps what it was given, in order."""

    def __init__(self, *, broken: bool = False) -> None:
        self.shown: list[Outbound] = []
        self.broken = broken

    async def deliver(self, outbound: Outbound) -> None:
        if self.broken:
            raise ChannelError("the screen is gone")
        self.shown.append(outbound)


async def test_a_platform_shown_here_takes_the_pieces_straight_and_only_the_answer_is_queued(
    bus: MemoryBus, store: SqlStore
) -> None:
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})),
        [*(TextDelta(text=t) for t in ("4", "2")), Finished()],
    ]
    streaming = {"terminal": StreamPolicy(interval=0.0, shows_progress=True)}
    worker, _ = make_worker(bus, store, script, tools=builtin_tools(), streaming=streaming)
    screen = _Screen()
    worker.handler.outbox.show_here("terminal", screen)
    outbox = Outbox(bus)
    inbound = message("6*7?")

    async with running(worker):
        await hand_in(worker, inbound)
        queued = await outbox.turn_of(inbound)

    # Shown before the answer was queued (the turn sent them first), in the order sent.
    assert [(o.kind, o.text, o.seq) for o in screen.shown] == [
        ("typing", "", 0),
        ("progress", "calculator(expression='6*7')", 0),
        ("delta", "4", 1),
        ("delta", "42", 2),
    ]
    assert [(o.kind, o.text, o.seq) for o in queued] == [("reply", "42", 3)]
    assert await outbox.rest() == []


async def test_a_piece_a_platform_shown_here_cannot_show_is_dropped_and_the_answer_queued(
    bus: MemoryBus, store: SqlStore
) -> None:
    streaming = {"terminal": StreamPolicy(interval=0.0, shows_progress=True)}
    worker, _ = make_worker(bus, store, [text_reply("Hello Alice!")], streaming=streaming)
    worker.handler.outbox.show_here("terminal", _Screen(broken=True))
    outbox = Outbox(bus)
    inbound = message("hi")

    async with running(worker):
        await hand_in(worker, inbound)
        queued = await outbox.turn_of(inbound)

    assert [(o.kind, o.text) for o in queued] == [("reply", "Hello Alice!")]
    assert await store.is_processed(inbound.dedupe_key)


# --- ordering within and across sessions ---------------------------------------------------


async def test_one_session_runs_its_messages_one_at_a_time_while_another_session_proceeds(
    bus: MemoryBus, store: SqlStore
) -> None:
    marks: list[str] = []
    first_started, release_first = asyncio.Event(), asyncio.Event()

    async def first(_request: ModelRequest) -> list[ModelEvent]:
        marks.append("first:start")
        first_started.set()
        await asyncio.wait_for(release_first.wait(), PATIENCE)
        marks.append("first:end")
        return text_reply("one")

    async def second(_request: ModelRequest) -> list[ModelEvent]:
        marks.append("second:start")
        return text_reply("two")

    async def other(_request: ModelRequest) -> list[ModelEvent]:
        marks.append("other")
        return text_reply("three")

    step = routed({"first": first, "second": second, "other": other})
    worker, provider = make_worker(bus, store, [step] * 3)
    outbox = Outbox(bus)
    bob = Address(platform="terminal", chat="bob")
    a, b, c = message("first"), message("second"), message("other", bob)

    async with running(worker):
        await hand_in(worker, a, b, c)
        await first_started.wait()
        # c was queued after b, so once c is answered the worker has long taken b.
        await outbox.turn_of(c)
        # Bob's turn ran while the first was held (the two may reach the model in either order).
        assert sorted(marks) == ["first:start", "other"]

        release_first.set()
        await outbox.turn_of(b)

    assert marks[2:] == ["first:end", "second:start"]
    replies = [o.reply_to for o in outbox.seen if o.kind == "reply"]
    assert replies == [c.id, a.id, b.id]
    seen_by_second = provider.requests[-1].messages
    assert [m.text for m in seen_by_second] == ["first", "one", "second"]


async def test_two_sessions_run_their_turns_at_the_same_time(
    bus: MemoryBus, store: SqlStore
) -> None:
    started = {"alice": asyncio.Event(), "bob": asyncio.Event()}

    def meets(me: str, other: str) -> Callable[[ModelRequest], Awaitable[list[ModelEvent]]]:
        async def answer(_request: ModelRequest) -> list[ModelEvent]:
            started[me].set()
            # One after the other, this times out (failing the turn) instead of hanging.
            await asyncio.wait_for(started[other].wait(), PATIENCE)
            return text_reply(f"hi {me}")

        return answer

    step = routed({"alice": meets("alice", "bob"), "bob": meets("bob", "alice")})
    worker, _ = make_worker(bus, store, [step] * 2)
    outbox = Outbox(bus)
    for_alice = message("alice")
    for_bob = message("bob", Address(platform="terminal", chat="bob"))

    async with running(worker):
        await hand_in(worker, for_alice, for_bob)
        alice_reply = (await outbox.turn_of(for_alice))[-1]
        bob_reply = (await outbox.turn_of(for_bob))[-1]

    assert (alice_reply.kind, alice_reply.text, alice_reply.failed) == ("reply", "hi alice", False)
    assert (bob_reply.kind, bob_reply.text, bob_reply.failed) == ("reply", "hi bob", False)


# --- redelivery ----------------------------------------------------------------------------


async def test_a_redelivered_message_is_not_answered_twice(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    worker, provider = make_worker(bus, store, [text_reply("first answer"), text_reply("next")])
    outbox = Outbox(bus)
    original = message("hello", platform_message_id="update-1")
    # The platform sent the same update again: a new envelope, the same platform message id.
    again = message("hello", platform_message_id="update-1")
    following = message("next one", platform_message_id="update-2")

    async with running(worker):
        await hand_in(worker, original)
        await outbox.turn_of(original)
        await hand_in(worker, again, following)
        await outbox.turn_of(following)
        await worker.idle.wait()

    assert [o.reply_to for o in outbox.seen] == [original.id] * 3 + [following.id] * 3
    assert len(provider.requests) == 2
    assert await worker.mailboxes.waiting() == 0


async def test_a_message_already_marked_processed_is_acked_without_an_answer(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    worker, provider = make_worker(bus, store, [text_reply("later")])
    outbox = Outbox(bus)
    answered = message("answered before a crash", platform_message_id="m-9")
    await store.mark_processed(answered.dedupe_key)
    later = message("later", platform_message_id="m-10")

    async with running(worker):
        await hand_in(worker, answered, later)
        await outbox.turn_of(later)
        await worker.idle.wait()

    assert {o.reply_to for o in outbox.seen} == {later.id}
    assert len(provider.requests) == 1
    assert await worker.mailboxes.waiting() == 0


# --- commands ------------------------------------------------------------------------------


async def test_new_starts_a_fresh_session_for_the_chat(bus: MemoryBus, store: SqlStore) -> None:
    worker, provider = make_worker(bus, store, [text_reply("one"), text_reply("two")])
    outbox = Outbox(bus)
    before, reset, after = message("remember this"), command("new"), message("fresh start")

    async with running(worker):
        await hand_in(worker, before)
        await outbox.turn_of(before)
        old = await store.current_session(TERMINAL.session_key)
        await hand_in(worker, reset)
        notice = (await outbox.turn_of(reset))[-1]
        new = await store.current_session(TERMINAL.session_key)
        await hand_in(worker, after)
        await outbox.turn_of(after)

    assert (notice.kind, notice.text) == ("notice", "Started a new conversation.")
    assert new.id != old.id
    assert [m.text for m in provider.requests[-1].messages] == ["fresh start"]
    assert [m.text for m in await store.list_messages(old.id)] == ["remember this", "one"]


class _RacedStore(SqlStore):
    """A store whose first look for a key's session finds none, while another writer (the web
    page, another process) makes one just after: the turn's own making then finds it."""

    made_meanwhile: str | None = None

    async def turn_standing(
        self, run_key: str, session_key: str, *, chat: str | None = None
    ) -> TurnStanding:
        found = await super().turn_standing(run_key, session_key, chat=chat)
        if found.session is None and self.made_meanwhile is None:
            self.made_meanwhile = (await self.create_session(session_key)).id
        return found


async def test_a_first_message_whose_session_another_writer_made_meanwhile_goes_into_it(
    bus: MemoryBus, clock: LeaseClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await _RacedStore.open(sqlite_url(tmp_path / "raced.db"))
    assert isinstance(store, _RacedStore)
    # One message a minute: counted twice, the message would be refused.
    limits = RateLimits(
        RateLimitSettings(rate_limit="1/minute", chat_rate_limit="", daily_turns=0),
        MemoryStorage(),
    )
    try:
        worker, provider = make_worker(
            bus,
            store,
            [text_reply("Hello Alice!")],
            policy=ChannelPolicy(default_access=PlatformAccess()),
            rate_limits=limits,
        )
        outbox = Outbox(bus, "telegram")
        group = Address(platform="telegram", bot="b", chat="g1")
        inbound = Inbound(address=group, user_id="u1", text="hi", mentions_bot=True)
        async with running(worker):
            await hand_in(worker, inbound)
            sent = await outbox.turn_of(inbound)
            await worker.idle.wait()

        # Answered once, in the session the other writer made, at once (not as a failure
        # tried again); the id the turn had chosen for it was never used.
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert [(o.kind, o.text) for o in sent] == [
            ("typing", ""),
            ("delta", "Hello Alice!"),
            ("reply", "Hello Alice!"),
        ]
        assert warned == []
        assert len(provider.requests) == 1
        assert store.made_meanwhile is not None
        assert [s.id for s in await store.list_sessions()] == [store.made_meanwhile]
        texts = [m.text for m in await store.list_messages(store.made_meanwhile)]
        assert texts == ["hi", "Hello Alice!"]
        assert await worker.mailboxes.waiting() == 0
    finally:
        await store.close()


async def test_cost_reports_the_tokens_of_the_current_conversation(
    bus: MemoryBus, store: SqlStore
) -> None:
    usage = Usage(input_tokens=1200, output_tokens=34, cache_read_tokens=5)
    worker, provider = make_worker(bus, store, [text_reply("hi", usage=usage)])
    outbox = Outbox(bus)
    hello, cost = message("hello"), command("cost")

    async with running(worker):
        await hand_in(worker, hello)
        await outbox.turn_of(hello)
        await hand_in(worker, cost)
        sent = await outbox.turn_of(cost)

    assert [(o.kind, o.text) for o in sent] == [
        (
            "notice",
            "This conversation has cost at least $0.00 over 1 model call (1 with a model that "
            "has no known price): 1,200 tokens in, 34 out, 5 read from cache, 0 written to cache.",
        )
    ]
    assert len(provider.requests) == 1


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("help", HELP_TEXT),
        ("HELP", HELP_TEXT),
        ("frobnicate", f"Unknown command /frobnicate.\n{HELP_TEXT}"),
    ],
)
async def test_help_and_unknown_commands_answer_with_a_notice_and_no_model_call(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock, word: str, expected: str
) -> None:
    worker, provider = make_worker(bus, store, [])
    outbox = Outbox(bus)
    inbound = command(word)

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)
        await worker.idle.wait()

    assert [(o.kind, o.text, o.reply_to) for o in sent] == [("notice", expected, inbound.id)]
    assert provider.requests == []
    assert await worker.mailboxes.waiting() == 0


# --- cancel, limits, modes -----------------------------------------------------------------


async def test_a_cancel_stops_the_running_turn_of_that_session(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    asked, never_set, stopped = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        asked.set()
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            stopped.set()
            raise
        return text_reply("unreachable")

    worker, provider = make_worker(bus, store, [thinks, text_reply("back again")])
    outbox = Outbox(bus)
    long_one = message("write an essay")
    # A cancel for another chat must not touch this one's turn.
    elsewhere = Inbound(kind="cancel", address=Address(platform="terminal", chat="bob"))
    cancel = Inbound(kind="cancel", address=TERMINAL, user_id="u1")
    follow_up = message("never mind")

    async with running(worker):
        await hand_in(worker, long_one)
        await asked.wait()
        await hand_in(worker, elsewhere, cancel)
        sent = await outbox.turn_of(long_one)
        await hand_in(worker, follow_up)
        answer = (await outbox.turn_of(follow_up))[-1]
        await worker.idle.wait()

    assert [(o.kind, o.text) for o in sent] == [("typing", ""), ("notice", "Cancelled.")]
    assert stopped.is_set()
    assert answer.text == "back again"
    assert [m.role for m in provider.requests[-1].messages] == ["user", "user"]
    assert await worker.mailboxes.waiting() == 0


async def test_an_oversized_message_gets_a_notice_and_no_model_call(
    bus: MemoryBus, store: SqlStore
) -> None:
    worker, provider = make_worker(bus, store, [], policy=ChannelPolicy(max_input_chars=10))
    outbox = Outbox(bus)
    inbound = message("x" * 11)

    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)

    assert [o.kind for o in sent] == ["notice"]
    assert "too long (11 characters; the limit is 10)" in sent[0].text
    assert provider.requests == []


async def test_the_capability_mode_comes_from_the_channel_policy(
    bus: MemoryBus, store: SqlStore
) -> None:
    async def send_email(_args: NoArgs, _ctx: ToolContext) -> str:
        return "sent"

    email = Tool(
        name="send_email",
        description="Send an email.",
        args=NoArgs,
        tier=SafetyTier.SIDE_EFFECTING,
        run=send_email,
    )
    trusted = Address(platform="telegram", chat="owner")
    policy = ChannelPolicy(
        modes={"terminal": "full"}, chat_modes={"telegram:default:owner": "full"}
    )
    worker, provider = make_worker(
        bus, store, [text_reply("ok")] * 3, tools=[email, *builtin_tools()], policy=policy
    )
    terminal, telegram = Outbox(bus), Outbox(bus, "telegram")
    from_terminal = message("hi")
    from_telegram = message("hi", Address(platform="telegram", chat="group"))
    from_owner = message("hi", trusted)

    async with running(worker):
        await hand_in(worker, from_terminal)
        await terminal.turn_of(from_terminal)
        await hand_in(worker, from_telegram)
        await telegram.turn_of(from_telegram)
        await hand_in(worker, from_owner)
        await telegram.turn_of(from_owner)

    offered = [[t.name for t in r.tools] for r in provider.requests]
    assert offered == [
        ["calculator", "current_time", "send_email"],
        ["calculator", "current_time"],
        ["calculator", "current_time", "send_email"],
    ]
    assert "shared chat" in provider.requests[1].system
    assert await terminal.is_empty()


# --- lifecycle events and failures ---------------------------------------------------------


async def lifecycle_of_one_turn(
    bus: MemoryBus, worker: Worker, inbound: Inbound, *, until: str = "agent.run.complete"
) -> list[EventEnvelope]:
    """The events topic's envelopes while the worker answers `inbound`, up to `until`."""
    outbox = Outbox(bus)
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    seen: list[EventEnvelope] = []
    try:
        async with running(worker):
            await hand_in(worker, inbound)
            await outbox.turn_of(inbound)
            while not seen or seen[-1].name != until:
                envelope = await asyncio.wait_for(anext(events), PATIENCE)
                assert isinstance(envelope, EventEnvelope)
                seen.append(envelope)
    finally:
        await subscription.aclose()
    return seen


async def test_lifecycle_events_are_published_on_the_events_topic(
    bus: MemoryBus, store: SqlStore
) -> None:
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="calculator", arguments={"expression": "2+2"})),
        text_reply("4"),
    ]
    worker, _ = make_worker(bus, store, script, tools=builtin_tools())
    inbound = message("2+2?")
    seen = await lifecycle_of_one_turn(bus, worker, inbound, until="turn.settled")

    assert [e.name for e in seen] == [
        "agent.run.start",
        "tool.request",
        "tool.result",
        "checkpoint.saved",
        "agent.run.complete",
        "turn.settled",
    ]
    assert seen[3].data["tool_rounds"] == 1
    assert seen[3].data["run_key"] == inbound.dedupe_key
    assert seen[5].data["outcome"] == "completed"
    session = await store.current_session(TERMINAL.session_key)
    run_id = seen[0].data["run_id"]
    assert run_id
    assert {(e.session_id, e.run_id, e.session_key) for e in seen} == {
        (session.id, run_id, TERMINAL.session_key)
    }
    assert seen[1].data["arguments"] == {"expression": "2+2"}
    assert seen[2].data["output"] == "2+2 = 4"
    assert seen[4].data["text"] == "4"


async def test_a_provider_failure_is_answered_with_an_apology_marked_failed(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    worker, _ = make_worker(bus, store, [ProviderError("overloaded", "busy", provider="x")])
    outbox = Outbox(bus)
    inbound = message("hi")

    async with running(worker):
        await hand_in(worker, inbound)
        reply = (await outbox.turn_of(inbound))[-1]
        await worker.idle.wait()

    assert (reply.kind, reply.text, reply.failed) == ("reply", MODEL_UNAVAILABLE, True)
    assert await worker.mailboxes.waiting() == 0


# --- shutdown ------------------------------------------------------------------------------


async def test_stop_returns_promptly_while_idle(bus: MemoryBus, store: SqlStore) -> None:
    worker, _ = make_worker(bus, store, [])
    outbox = Outbox(bus)
    inbound = command("help")
    task = asyncio.create_task(worker.run())
    await hand_in(worker, inbound)
    # The worker takes the next receive right after handing this one off: it is idle-waiting.
    await outbox.turn_of(inbound)
    await worker.idle.wait()

    await asyncio.wait_for(worker.stop(), 1.0)
    await asyncio.wait_for(task, 1.0)

    assert task.done()
    assert task.exception() is None


async def test_stop_lets_a_running_turn_finish_and_ack(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    asked, release = asyncio.Event(), asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        asked.set()
        await asyncio.wait_for(release.wait(), PATIENCE)
        return text_reply("finished in time")

    worker, _ = make_worker(bus, store, [thinks])
    outbox = Outbox(bus)
    inbound = message("hi")
    task = asyncio.create_task(worker.run())
    await hand_in(worker, inbound)
    await asked.wait()

    stopping = asyncio.create_task(worker.stop(grace=PATIENCE))
    await asyncio.wait_for(task, PATIENCE)  # taking work ends first...
    assert not stopping.done()  # ...while the turn in flight is waited for
    release.set()
    await asyncio.wait_for(stopping, PATIENCE)

    assert (await outbox.turn_of(inbound))[-1].text == "finished in time"
    assert await worker.mailboxes.waiting() == 0


async def test_a_turn_still_running_after_the_grace_period_is_left_in_its_mailbox(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    asked, never_set = asyncio.Event(), asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        asked.set()
        await never_set.wait()
        return text_reply("unreachable")

    worker, _ = make_worker(bus, store, [thinks])
    inbound = message("hi")
    task = asyncio.create_task(worker.run())
    await hand_in(worker, inbound)
    await asked.wait()

    await asyncio.wait_for(worker.stop(grace=0.1), PATIENCE)
    await asyncio.wait_for(task, PATIENCE)

    # Left in the mailbox, not finished: the next worker to claim the session runs it again.
    assert await worker.mailboxes.waiting() == 1
    assert await worker.mailboxes.pending() == [inbound.address.session_key]
    claim = await worker.mailboxes.claim(inbound.address.session_key, owner="next")
    assert claim is not None
    head = await claim.head()
    assert head is not None and head.id == inbound.id
    assert not await store.is_processed(inbound.dedupe_key)


async def test_stop_starts_no_more_turns_and_leaves_waiting_work_in_mailboxes(
    bus: MemoryBus, store: SqlStore, clock: LeaseClock
) -> None:
    asked, never_set = asyncio.Event(), asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        asked.set()
        await never_set.wait()
        return text_reply("unreachable")

    worker, provider = make_worker(bus, store, [thinks], concurrency=1)
    queued = [message(f"m{i}") for i in range(4)]
    other = message("another chat", Address(platform="terminal", chat="bob"))
    await hand_in(worker, *queued, other)
    task = asyncio.create_task(worker.run())
    await asked.wait()

    await asyncio.wait_for(worker.stop(grace=0.1), PATIENCE)
    await asyncio.wait_for(task, 1.0)

    assert worker.idle.is_set()  # nothing was started after stop()
    assert len(provider.requests) == 1
    assert await worker.mailboxes.waiting() == len(queued) + 1
    # The first message's turn was cut off; it and the others wait for the next worker.
    for key, expected in [
        (queued[0].address.session_key, [i.id for i in queued]),
        (other.address.session_key, [other.id]),
    ]:
        claim = await worker.mailboxes.claim(key, owner="next")
        assert claim is not None
        waiting = []
        while (head := await claim.head()) is not None:
            waiting.append(head.id)
            await claim.done(head)
        assert waiting == expected


async def test_lifecycle_events_carry_scrubbed_text(bus: MemoryBus, store: SqlStore) -> None:
    """Every `switchboard events` reader sees these: a key in the reply must not reach them."""
    key = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
    worker, _ = make_worker(bus, store, [text_reply(f"Your key {key} is set.")])
    seen = await lifecycle_of_one_turn(bus, worker, message("is my key set?"))

    complete = seen[-1].data
    assert complete["text"] == "Your key [redacted] is set."
    assert key not in repr([e.model_dump() for e in seen])


# --- the mailboxes away ---------------------------------------------------------------------


class _AwayMailboxes(MemoryMailboxes):
    """Refuses the first `failures` waits for a wake, then the first `claims` claims, like
    Redis while it restarts."""

    def __init__(self, failures: int, claims: int) -> None:
        super().__init__()
        self.failures = failures
        self.claims = claims
        self.refused = asyncio.Event()

    async def woken(self, within: float) -> str | None:
        if self.failures:
            self.failures -= 1
            self.refused.set()
            raise BusError("connection refused")
        return await super().woken(within)

    async def claim(self, session_key: str, *, owner: str) -> Claim | None:
        if self.claims:
            self.claims -= 1
            raise BusError("connection refused")
        return await super().claim(session_key, owner=owner)


async def test_a_worker_says_it_is_not_ready_while_the_mailboxes_are_away_and_carries_on(
    bus: MemoryBus, store: SqlStore
) -> None:
    readiness = Readiness()
    mailboxes = _AwayMailboxes(failures=3, claims=2)
    worker, _ = make_worker(
        bus, store, [text_reply("Back again.")], readiness=readiness, mailboxes=mailboxes
    )
    outbox = Outbox(bus)
    inbound = message("hi")
    async with running(worker):
        await asyncio.wait_for(mailboxes.refused.wait(), PATIENCE)
        report = await readiness.report()
        assert not report.ready
        assert report.details["worker wakes"] == "connection refused"

        await hand_in(worker, inbound)
        sent = await asyncio.wait_for(outbox.turn_of(inbound), PATIENCE)
        await worker.idle.wait()
        assert (await readiness.report()).ready
    assert [o.text for o in sent if o.kind == "reply"] == ["Back again."]
    assert mailboxes.claims == 0
    assert await worker.mailboxes.waiting() == 0


class _AwayStore(SqlStore):
    """Refuses the next `refusals` looks at processed marks, like Redis while it restarts."""

    refusals = 0

    async def is_processed(self, key: str) -> bool:
        if self.refusals:
            self.refusals -= 1
            raise StoreError("connection refused")
        return await super().is_processed(key)


class _FailsWhileAway:
    """A handler whose first turn fails because the store went away (then it comes back)."""

    def __init__(self, store: _AwayStore) -> None:
        self.store = store
        self.handled: list[str] = []
        self.apologized: list[str] = []
        self.done = asyncio.Event()

    async def handle(
        self,
        inbound: Inbound,
        *,
        cancel: asyncio.Event,
        fence: Fence,
        done: Callable[[], Awaitable[None]] | None = None,
        claim: object = None,
    ) -> None:
        self.handled.append(inbound.text)
        if len(self.handled) == 1:
            self.store.refusals = 2  # the worker's next looks find the store away
            raise StoreError("connection refused")
        self.done.set()

    async def apologize(self, inbound: Inbound) -> None:
        self.apologized.append(inbound.text)

    async def abandon(self, inbound: Inbound) -> None:
        """Never asked: no crash policy."""


async def test_a_turn_cut_off_by_the_store_going_away_is_tried_again_without_counting(
    bus: MemoryBus, tmp_path: Path
) -> None:
    store = await _AwayStore.open(sqlite_url(tmp_path / "away.db"))
    assert isinstance(store, _AwayStore)
    handler = _FailsWhileAway(store)
    worker = Worker(
        bus=bus,
        store=store,
        mailboxes=MemoryMailboxes(),
        handler=cast(InboundHandler, handler),
        confirmations=None,
        on_crash=None,
        readiness=Readiness(),
        attempts=1,  # a counted failure would give up at once and apologize
    )
    try:
        async with running(worker):
            await hand_in(worker, message("hi"))
            await asyncio.wait_for(handler.done.wait(), PATIENCE)
        assert (handler.handled, handler.apologized) == (["hi", "hi"], [])
    finally:
        await store.close()


# --- the data disk full ---------------------------------------------------------------------


class _SmallDisk(SqlStore):
    """A store whose file cannot grow while `full`: SQLite's own `max_page_count` makes it
    refuse writes that need a new page with its real SQLITE_FULL error, as a full disk does."""

    full = False

    def __init__(self, engine: AsyncEngine, *, clock: Callable[[], datetime]) -> None:
        super().__init__(engine, clock=clock)
        event.listen(engine.sync_engine, "begin", self._limit)

    def _limit(self, connection: Connection) -> None:
        # Lowered to the pages the file has now when full (SQLite does not go below that).
        pages = 1 if self.full else 1073741823
        connection.exec_driver_sql(f"PRAGMA max_page_count = {pages}")


class _Warnings(logging.Handler):
    """Every warning (or worse) the worker's parts log; `first` is set by the first, and
    `worker` by the worker's first line (at any level): it was handed the failure."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.first = asyncio.Event()
        self.worker = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "core.worker":
            self.worker.set()
        if record.levelno >= logging.WARNING:
            self.lines.append(record.getMessage())
            self.first.set()


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(OUTAGE_BUDGET, id="the turn waits"),
        pytest.param(0.0, id="the turn gives up and the worker keeps the message"),
    ],
)
async def test_a_message_is_kept_while_the_disk_is_full_and_answered_once_there_is_room(
    bus: MemoryBus, tmp_path: Path, clock: LeaseClock, budget: float
) -> None:
    store = await _SmallDisk.open(sqlite_url(tmp_path / "small.db"))
    assert isinstance(store, _SmallDisk)
    provider = ScriptedProvider([text_reply("Answered.")])
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        patience=Patience(budget=budget),
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(modes={"terminal": "full"}),
        attempts=1,  # a counted failure would give up at once and apologize
    )
    outbox = Outbox(bus)
    # Longer than a page: storing it needs new pages (its checkpoint and its message).
    inbound = message("a long question " * 500)
    warnings = _Warnings()
    core = logging.getLogger("core")
    level = core.level
    core.addHandler(warnings)
    core.setLevel(logging.DEBUG)
    try:
        # The session is made beforehand: made during the outage, a write that small fits the
        # pages the file has, and its success would rightly end the outage meanwhile.
        await store.current_session(TERMINAL.session_key)
        store.full = True
        async with running(worker):
            await hand_in(worker, inbound)
            # The disk stays full until the turn met it, and, when the turn gives up at
            # once, until the worker has been handed the failure.
            noticed = warnings.first if budget else warnings.worker
            await asyncio.wait_for(noticed.wait(), PATIENCE)
            store.full = False
            sent = await asyncio.wait_for(outbox.turn_of(inbound), PATIENCE)
            await worker.idle.wait()
        session = await store.current_session(TERMINAL.session_key)
        stored = [m.text for m in await store.list_messages(session.id)]
        processed = await store.is_processed(inbound.dedupe_key)
    finally:
        core.removeHandler(warnings)
        core.setLevel(level)
        await store.close()

    assert [(o.text, o.failed) for o in sent if o.ends_turn] == [("Answered.", False)]
    assert len(provider.requests) == 1
    assert stored == [inbound.text, "Answered."]
    assert processed
    assert await worker.mailboxes.waiting() == 0
    # One line says what is wrong, and no more while it lasts.
    assert [line for line in warnings.lines if "disk is full" in line] == warnings.lines
    assert len(warnings.lines) == 1, warnings.lines


# --- the rate limits' counters away ---------------------------------------------------------


class _AwayCounters(MemoryStorage):
    """Counters whose next `failures` counts fail as on a Redis that is restarting (the
    limits package raises redis-py's errors as they are)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if self.failures:
            self.failures -= 1
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379.")
        return await super().acquire_entry(key, limit, expiry, amount)


async def test_a_turn_whose_count_meets_a_redis_outage_waits_for_it_and_is_answered(
    bus: MemoryBus, store: SqlStore
) -> None:
    limits = RateLimits(
        RateLimitSettings(rate_limit="10/minute", chat_rate_limit="", daily_turns=0),
        _AwayCounters(failures=1),
    )
    worker, provider = make_worker(
        bus,
        store,
        [text_reply("Hello Alice!")],
        policy=ChannelPolicy(default_access=PlatformAccess()),
        rate_limits=limits,
        attempts=1,  # a counted failure would give up at once and apologize
    )
    outbox = Outbox(bus, "telegram")
    group = Address(platform="telegram", bot="b", chat="g1")
    inbound = Inbound(address=group, user_id="u1", text="hi", mentions_bot=True)
    async with running(worker):
        await hand_in(worker, inbound)
        sent = await outbox.turn_of(inbound)
        await worker.idle.wait()

    assert [(o.text, o.failed) for o in sent if o.ends_turn] == [("Hello Alice!", False)]
    assert len(provider.requests) == 1


async def test_turn_settled_is_published_once_the_message_is_marked_and_answered(
    bus: MemoryBus, store: SqlStore
) -> None:
    worker, _ = make_worker(bus, store, [text_reply("hello there")])
    outbox = Outbox(bus)
    inbound = message("hi")
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    try:
        async with running(worker):
            await hand_in(worker, inbound)
            seen: list[EventEnvelope] = []
            while not seen or seen[-1].name != "turn.settled":
                envelope = await asyncio.wait_for(anext(events), PATIENCE)
                assert isinstance(envelope, EventEnvelope)
                seen.append(envelope)
            marked_when_settled = await store.is_processed(inbound.dedupe_key)
            sent = await outbox.turn_of(inbound)
    finally:
        await subscription.aclose()

    assert [e.name for e in seen] == ["agent.run.start", "agent.run.complete", "turn.settled"]
    assert marked_when_settled
    assert (sent[-1].kind, sent[-1].text) == ("reply", "hello there")
    assert seen[-1].data == {
        "run_id": seen[0].data["run_id"],
        "outcome": "completed",
        "platform": "terminal",
    }
