"""Rate limits (issue 17, point 4): `RateLimits` over the `limits` package's memory storage,
and a worker that answers over the limit with one notice, then silence, and no model call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from limits.aio.storage import MemoryStorage

from core import ratelimit
from core.backends.sql.store import SqlStore
from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.policy import ChannelPolicy, PlatformAccess
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply
from core.ratelimit import RateLimits, RateLimitSettings
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker, hand_in

GROUP = Address(platform="telegram", bot="b", chat="-100")
PATIENCE = 5.0


def said(user: str, address: Address = GROUP, text: str = "hi") -> Inbound:
    return Inbound(address=address, user_id=user, text=text, is_direct=True)


def limits(**settings: object) -> RateLimits:
    return RateLimits(RateLimitSettings.model_validate(settings), MemoryStorage())


async def test_a_person_over_the_rate_gets_one_notice_then_silence() -> None:
    limiter = limits(rate_limit="2/minute", chat_rate_limit="", daily_turns=0)

    answers = [await limiter.admit(said("7"), is_admin=False) for _ in range(5)]

    assert answers[:2] == [(True, None), (True, None)]
    assert answers[2] == (
        False,
        "You are sending messages faster than I answer (2 per minute); please wait a moment.",
    )
    assert answers[3:] == [(False, None), (False, None)]
    # Another person is counted apart.
    assert await limiter.admit(said("8"), is_admin=False) == (True, None)


async def test_the_chat_limit_counts_everyone_in_it_and_the_daily_cap_each_person() -> None:
    limiter = limits(rate_limit="", chat_rate_limit="3/minute", daily_turns=0)
    for user in ("1", "2", "3"):
        assert (await limiter.admit(said(user), is_admin=False))[0]
    allowed, notice = await limiter.admit(said("4"), is_admin=False)
    assert not allowed and notice is not None and notice.startswith("This chat is sending")
    elsewhere = GROUP.model_copy(update={"chat": "-200"})
    assert (await limiter.admit(said("4", elsewhere), is_admin=False))[0]

    daily = limits(rate_limit="", chat_rate_limit="", daily_turns=2)
    for chat in ("a", "b"):
        assert (
            await daily.admit(said("7", GROUP.model_copy(update={"chat": chat})), is_admin=False)
        )[0]
    allowed, notice = await daily.admit(said("7"), is_admin=False)
    assert (allowed, notice) == (
        False,
        "You have used your 2 messages for the last 24 hours; please try again later.",
    )


async def test_a_message_refused_by_one_limit_uses_none_of_the_others() -> None:
    limiter = limits(rate_limit="1/minute", chat_rate_limit="2/minute", daily_turns=0)
    assert (await limiter.admit(said("7"), is_admin=False))[0]
    for _ in range(3):
        assert not (await limiter.admit(said("7"), is_admin=False))[0]
    # Person 7's refused messages did not fill the chat's window: person 8 still gets through.
    assert (await limiter.admit(said("8"), is_admin=False))[0]


async def test_admins_and_local_channels_are_exempt() -> None:
    limiter = limits(rate_limit="1/minute", chat_rate_limit="1/minute", daily_turns=1)
    terminal = Address(platform="terminal", chat="me")
    web = Address(platform="web", chat="page")

    for _ in range(3):
        assert await limiter.admit(said("7"), is_admin=True) == (True, None)
        assert await limiter.admit(said("me", terminal), is_admin=False) == (True, None)
        assert await limiter.admit(said("me", web), is_admin=False) == (True, None)


def test_bad_rates_are_refused_when_read() -> None:
    with pytest.raises(ValueError, match="write it like '20/minute'"):
        RateLimitSettings(rate_limit="twenty a minute")
    assert RateLimitSettings().rate_limit == "20/minute"


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def test_the_worker_makes_no_model_call_over_the_limit(
    bus: MemoryBus, store: SqlStore
) -> None:
    provider = ScriptedProvider([text_reply("one"), text_reply("two")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(admins=frozenset({"telegram:boss"})),
        rate_limits=limits(rate_limit="1/minute", chat_rate_limit="", daily_turns=0),
    )
    inbounds = [said("7", text="one"), said("7", text="two"), said("7", text="three")]
    inbounds.append(said("boss", text="admin"))
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        for inbound in inbounds:
            await hand_in(worker, inbound)
        # One reply, one notice and the admin's reply; the third message gets nothing.
        while len([o for o in outbox.seen if o.kind in ("reply", "notice")]) < 3:
            assert await outbox.next() is not None, f"only {outbox.seen} arrived"
        await worker.idle.wait()
        late = await outbox.rest()
        assert all(o.kind == "typing" for o in late), late
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    finals = [o for o in outbox.seen if o.kind in ("reply", "notice")]
    typing = {o.reply_to for o in outbox.seen if o.kind == "typing"}

    by_message = {o.reply_to: (o.kind, o.text) for o in finals}
    assert by_message[inbounds[0].id] == ("reply", "one")
    assert by_message[inbounds[1].id][0] == "notice"
    assert "faster than I answer" in by_message[inbounds[1].id][1]
    assert inbounds[2].id not in by_message
    assert by_message[inbounds[3].id] == ("reply", "two")
    assert len(provider.requests) == 2
    assert await store.is_processed(inbounds[2].dedupe_key)
    # Typing shows only for the turns that ran; the refused ones were counted before any turn
    # opened, so they left no checkpoint a restart could take for a cut-off turn.
    assert typing == {inbounds[0].id, inbounds[3].id}
    for refused in inbounds[1:3]:
        assert await store.get_checkpoint(refused.dedupe_key) is None
    assert await store.incomplete_checkpoints() == []


class _HeldLimits(RateLimits):
    """Rate limits whose count of a message waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__(
            RateLimitSettings(rate_limit="5/minute", chat_rate_limit="", daily_turns=0),
            MemoryStorage(),
        )
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def settle(self, tested: ratelimit.Tested) -> tuple[bool, str | None]:
        self.entered.set()
        await self.release.wait()
        return await super().settle(tested)


async def test_a_cancel_while_the_count_is_made_ends_the_message_once(
    bus: MemoryBus, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancel comes while the rate limits count the message: the turn opened after the
    # count stops at once.
    provider = ScriptedProvider([text_reply("too late")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    held = _HeldLimits()
    worker = build_worker(bus=bus, store=store, runtime=runtime, rate_limits=held)
    stopped = asyncio.Event()
    stop = worker.handler.stop

    async def stopping(turn: Inbound, request: Inbound, cancel: asyncio.Event) -> None:
        await stop(turn, request, cancel)
        stopped.set()

    monkeypatch.setattr(worker.handler, "stop", stopping)
    inbound = said("7", text="a long question")
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        await hand_in(worker, inbound)
        await asyncio.wait_for(held.entered.wait(), PATIENCE)
        cancel = Inbound(kind="cancel", address=inbound.address, user_id="7")
        await hand_in(worker, cancel)
        await asyncio.wait_for(stopped.wait(), PATIENCE)
        held.release.set()
        await outbox.until(kind="notice")
        await worker.idle.wait()
        await outbox.rest()
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    # Cancelled once, settled once: nothing left for the sweep to run again.
    # (Telegram shows a stopped answer in place: nothing was said yet, so "Stopped." alone.)
    assert [(o.kind, o.text) for o in outbox.seen] == [("notice", "Stopped.")]
    assert provider.requests == []
    assert await store.is_processed(inbound.dedupe_key)
    assert await worker.mailboxes.pending() == []
    assert await store.incomplete_checkpoints() == []


async def test_a_turn_whose_count_was_not_made_is_counted_when_it_runs_again(
    bus: MemoryBus, store: SqlStore
) -> None:
    # The checkpoint is written with the count: until the count is known it says so, and a
    # turn resumed from it is counted again, not waved through as admitted before.
    session = await store.current_session(GROUP.session_key)
    inbound = said("7")
    now = datetime.now(UTC)
    await store.save_checkpoint(
        Checkpoint(
            run_key=inbound.dedupe_key,
            session_id=session.id,
            inbound=inbound,
            started_at=now,
            updated_at=now,
            counted=False,
        )
    )
    provider = ScriptedProvider([text_reply("answered")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    limiter = limits(rate_limit="1/minute", chat_rate_limit="", daily_turns=0)
    worker = build_worker(bus=bus, store=store, runtime=runtime, rate_limits=limiter)
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        await hand_in(worker, inbound)
        await outbox.until(kind="reply")
        await worker.idle.wait()
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
    # Counted: the person's next message within the minute is over the limit.
    allowed, _ = await limiter.admit(said("7"), is_admin=False)
    assert not allowed


class _Time:
    """Stands in for the `time` module inside the `limits` memory storage: a clock by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        return self.now


async def test_once_the_window_passes_the_person_is_answered_and_warned_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import limits.aio.storage.memory as memory

    clock = _Time()
    monkeypatch.setattr(memory, "time", clock)
    limiter = limits(rate_limit="1/minute", chat_rate_limit="", daily_turns=0)

    assert (await limiter.admit(said("7"), is_admin=False))[0]
    assert (await limiter.admit(said("7"), is_admin=False))[1] is not None
    clock.now += 30
    assert await limiter.admit(said("7"), is_admin=False) == (False, None)
    clock.now += 31
    assert await limiter.admit(said("7"), is_admin=False) == (True, None)
    allowed, notice = await limiter.admit(said("7"), is_admin=False)
    assert not allowed and notice is not None


def command(user: str, word: str, address: Address = GROUP) -> Inbound:
    return Inbound(
        address=address, user_id=user, text=f"/{word}", kind="command", command=word, is_direct=True
    )


async def test_commands_count_against_the_rates_and_make_no_session_over_them(
    bus: MemoryBus, store: SqlStore
) -> None:
    provider = ScriptedProvider([])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(admins=frozenset({"telegram:boss"})),
        # The daily turns do not count commands: only the rate stops the fourth one here.
        rate_limits=limits(rate_limit="3/minute", chat_rate_limit="", daily_turns=1),
    )
    words = ["help", "new", "cost", "new", "help", "cost", "new"]
    inbounds = [command("7", word) for word in words]
    inbounds.append(command("boss", "help"))
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        for inbound in inbounds:
            await hand_in(worker, inbound)
        # Three answers, one notice and the admin's answer; the rest get nothing.
        while len([o for o in outbox.seen if o.kind == "notice"]) < 5:
            assert await outbox.next() is not None, f"only {outbox.seen} arrived"
        await worker.idle.wait()
        assert await outbox.rest() == []
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    by_message = {o.reply_to: o.text for o in outbox.seen}
    assert set(by_message) == {inbounds[i].id for i in (0, 1, 2, 3, 7)}
    assert "faster than I answer" in by_message[inbounds[3].id]
    assert "faster than I answer" not in by_message[inbounds[7].id]
    for refused in inbounds[3:7]:
        assert await store.is_processed(refused.dedupe_key)
    # One /new got through: one session made, not four.
    sessions = [s for s in await store.list_sessions() if s.key == GROUP.session_key]
    assert len(sessions) == 1, sessions


async def test_a_stranger_asking_for_the_pairing_code_again_is_bounded_by_the_rates(
    bus: MemoryBus, store: SqlStore
) -> None:
    runtime = AgentRuntime(
        provider=ScriptedProvider([]), model="m", tools=ToolRegistry([]), store=store
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(default_access=PlatformAccess(dm_policy="pairing")),
        rate_limits=limits(rate_limit="2/minute", chat_rate_limit="", daily_turns=0),
    )
    dm = Address(platform="telegram", bot="b", chat="42")
    inbounds = [said("42", dm, text=f"hello {n}") for n in range(5)]
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        for inbound in inbounds:
            await hand_in(worker, inbound)
        while len(outbox.seen) < 3:
            assert await outbox.next() is not None, f"only {outbox.seen} arrived"
        await worker.idle.wait()
        assert await outbox.rest() == []
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    texts = [o.text for o in outbox.seen]
    # The same code twice, then one notice, then silence.
    assert texts[0] == texts[1] and "pairing code is" in texts[0]
    assert "faster than I answer" in texts[2]
