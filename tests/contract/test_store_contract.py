"""The `Store` contract: every implementation must pass these same cases.

The `store` fixture is parametrized by implementation. To add one, add its name to the params of
`store_location` (and, if it needs a server, a branch there asking for that fixture) and one
branch in `store` that opens it with the given clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.errors import StoreError
from core.facts import MAX_FACT_CHARS, MemoryFact
from core.messages import ImagePart, Message, TextPart, ToolCall, Usage
from core.scheduling.models import (
    Cadence,
    CronCadence,
    IntervalCadence,
    OnceCadence,
    RunStatus,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
)
from core.store import (
    CompactionSummary,
    CostEntry,
    CostSummary,
    RedisStore,
    SqliteStore,
    Store,
)

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class TickingClock:
    """A clock that moves one second forward on every reading, so order never rests on luck."""

    def __init__(self, start: datetime = START) -> None:
        self._next = start

    def __call__(self) -> datetime:
        now = self._next
        self._next += timedelta(seconds=1)
        return now


@pytest.fixture(params=["sqlite", "redis"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Each implementation's name and where its empty store lives.

    A sync fixture on purpose: it asks for `redis_url` (and so starts the test redis-server)
    only for "redis", and an async fixture cannot resolve async fixtures by name.
    """
    name = str(request.param)
    if name == "redis":
        return name, request.getfixturevalue("redis_url")
    return name, str(tmp_path / "data" / "switchboard.db")


@pytest.fixture
async def store(store_location: tuple[str, str]) -> AsyncIterator[Store]:
    """An empty store of each implementation, closed after the test."""
    clock = TickingClock()
    opened: Store
    name, location = store_location
    if name == "sqlite":
        opened = await SqliteStore.open(location, clock=clock)
    elif name == "redis":
        opened = await RedisStore.open(location, clock=clock)
    else:
        raise AssertionError(f"no store implementation named {name!r}")
    try:
        yield opened
    finally:
        await opened.close()


def _is_utc(moment: datetime | None) -> bool:
    return moment is not None and moment.utcoffset() == timedelta(0)


# Sessions


async def test_current_session_creates_one_and_then_returns_it(store: Store) -> None:
    first = await store.current_session("telegram:42")
    again = await store.current_session("telegram:42")

    assert first.key == "telegram:42"
    assert first.message_count == 0
    assert _is_utc(first.created_at) and _is_utc(first.updated_at)
    assert again.id == first.id
    assert await store.get_session(first.id) == first


async def test_sessions_of_different_keys_are_separate(store: Store) -> None:
    a = await store.current_session("slack:T1:C1")
    b = await store.current_session("slack:T1:C2")

    assert a.id != b.id
    assert (await store.current_session("slack:T1:C1")).id == a.id


async def test_create_session_becomes_the_current_one(store: Store) -> None:
    """`/new`: a fresh session replaces the current one for its key only."""
    old = await store.current_session("discord:7")
    other = await store.current_session("discord:8")

    fresh = await store.create_session("discord:7")

    assert fresh.id != old.id
    assert fresh.key == "discord:7"
    assert fresh.message_count == 0
    assert fresh.created_at >= old.created_at
    assert (await store.current_session("discord:7")).id == fresh.id
    assert (await store.current_session("discord:8")).id == other.id
    assert await store.get_session(old.id) is not None


async def test_create_session_ids_are_unique(store: Store) -> None:
    sessions = [await store.create_session("terminal") for _ in range(20)]

    assert len({s.id for s in sessions}) == 20


async def test_concurrent_current_session_makes_one_session(store: Store) -> None:
    found = await asyncio.gather(*(store.current_session("web:1") for _ in range(10)))

    assert len({s.id for s in found}) == 1


async def test_get_session_of_unknown_id_is_none(store: Store) -> None:
    await store.current_session("terminal")

    assert await store.get_session("nosuchsessio") is None


async def test_get_session_counts_messages(store: Store) -> None:
    session = await store.current_session("terminal")
    await store.append_message(session.id, Message.user("one"))
    await store.append_message(session.id, Message.assistant("two"))

    found = await store.get_session(session.id)

    assert found is not None
    assert found.message_count == 2
    assert (await store.current_session("terminal")).message_count == 2


async def test_list_sessions_most_recently_updated_first(store: Store) -> None:
    first = await store.create_session("a")
    second = await store.create_session("b")
    third = await store.create_session("c")
    await store.append_message(first.id, Message.user("bump"))

    listed = await store.list_sessions()

    assert [s.id for s in listed] == [first.id, third.id, second.id]
    assert [s.message_count for s in listed] == [1, 0, 0]
    assert listed[0].updated_at > first.updated_at


async def test_list_sessions_honours_limit(store: Store) -> None:
    made = [await store.create_session(f"key{i}") for i in range(5)]

    listed = await store.list_sessions(limit=2)

    assert [s.id for s in listed] == [made[4].id, made[3].id]


async def test_list_sessions_of_empty_store_is_empty(store: Store) -> None:
    assert await store.list_sessions() == []


# Messages


async def test_append_assigns_seq_and_created_at(store: Store) -> None:
    session = await store.current_session("terminal")
    message = Message.user("hello")

    stored = await store.append_message(session.id, message)

    assert stored.seq == 1
    assert _is_utc(stored.created_at)
    assert stored.model_copy(update={"seq": 0, "created_at": None}) == message
    assert message.seq == 0


async def test_seq_counts_per_session_independently(store: Store) -> None:
    a = await store.create_session("a")
    b = await store.create_session("b")

    seqs_a = [(await store.append_message(a.id, Message.user(f"a{i}"))).seq for i in range(3)]
    seqs_b = [(await store.append_message(b.id, Message.user(f"b{i}"))).seq for i in range(2)]
    seqs_a.append((await store.append_message(a.id, Message.user("a3"))).seq)

    assert seqs_a == [1, 2, 3, 4]
    assert seqs_b == [1, 2]
    assert [m.text for m in await store.list_messages(a.id)] == ["a0", "a1", "a2", "a3"]
    assert [m.text for m in await store.list_messages(b.id)] == ["b0", "b1"]


async def test_concurrent_appends_get_unique_contiguous_seqs(store: Store) -> None:
    session = await store.current_session("terminal")
    other = await store.create_session("other")

    stored = await asyncio.gather(
        *(store.append_message(session.id, Message.user(f"m{i}")) for i in range(50)),
        *(store.append_message(other.id, Message.user(f"o{i}")) for i in range(10)),
    )

    ours, theirs = stored[:50], stored[50:]
    assert sorted(m.seq for m in ours) == list(range(1, 51))
    assert sorted(m.seq for m in theirs) == list(range(1, 11))
    listed = await store.list_messages(session.id)
    assert [m.seq for m in listed] == list(range(1, 51))
    assert {m.seq: m.text for m in listed} == {m.seq: m.text for m in ours}
    found = await store.get_session(session.id)
    assert found is not None and found.message_count == 50


async def test_list_messages_after_seq_and_limit(store: Store) -> None:
    session = await store.current_session("terminal")
    for i in range(1, 6):
        await store.append_message(session.id, Message.user(f"m{i}"))

    async def seqs(*, after_seq: int = 0, limit: int | None = None) -> list[int]:
        found = await store.list_messages(session.id, after_seq=after_seq, limit=limit)
        return [m.seq for m in found]

    assert await seqs() == [1, 2, 3, 4, 5]
    assert await seqs(after_seq=2) == [3, 4, 5]
    assert await seqs(limit=2) == [1, 2]
    assert await seqs(after_seq=2, limit=2) == [3, 4]
    assert await seqs(after_seq=4, limit=10) == [5]
    assert await seqs(after_seq=5) == []
    assert await seqs(limit=0) == []


async def test_list_messages_of_unknown_session_is_empty(store: Store) -> None:
    assert await store.list_messages("nosuchsessio") == []


async def test_every_message_field_round_trips(store: Store) -> None:
    session = await store.current_session("terminal")
    call = ToolCall(
        id="call_1",
        name="schedule",
        arguments={
            "when": {"cron": "0 9 * * 1", "tz": "Europe/Berlin"},
            "targets": [1, 2.5, None, True, {"deep": ["x", {"y": "ü 😀"}]}],
        },
    )
    bad_call = ToolCall(id="call_2", name="calc", raw_arguments="not json {")
    messages = [
        Message(role="system", content=[TextPart(text="You are terse.")]),
        Message.user(
            "look at these",
            images=[
                ImagePart(media_type="image/png", data=bytes(range(256))),
                ImagePart(media_type="image/jpeg", data=b"\xff\xd8\xff\x00\x80\xfe"),
                ImagePart(media_type="image/webp", data=b""),
            ],
        ),
        Message.assistant(
            "Let me check.",
            tool_calls=[call, bad_call],
            usage=Usage(
                input_tokens=120, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=7
            ),
        ),
        Message.tool_result(call, "scheduled"),
        Message.tool_result(bad_call, "arguments are not a JSON object", is_error=True),
        Message(role="assistant"),
    ]

    stored = [await store.append_message(session.id, m) for m in messages]
    listed = await store.list_messages(session.id)

    assert listed == stored
    for original, back in zip(messages, listed, strict=True):
        assert back.model_copy(update={"seq": 0, "created_at": None}) == original
    assert listed[1].images[1].data == b"\xff\xd8\xff\x00\x80\xfe"
    assert listed[1].images[0].data == bytes(range(256))
    assert listed[4].is_error is True
    assert listed[4].tool_call_id == "call_2" and listed[4].name == "calc"
    assert all(_is_utc(m.created_at) for m in listed)


async def test_append_to_unknown_session_raises_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="nosuchsessio"):
        await store.append_message("nosuchsessio", Message.user("lost"))

    assert await store.list_messages("nosuchsessio") == []
    assert await store.list_sessions() == []


async def test_failed_append_leaves_store_usable(store: Store) -> None:
    session = await store.current_session("terminal")
    with pytest.raises(StoreError):
        await store.append_message("nosuchsessio", Message.user("lost"))

    stored = await store.append_message(session.id, Message.user("kept"))

    assert stored.seq == 1


# Processed inbound ids


async def test_mark_processed_is_true_only_the_first_time(store: Store) -> None:
    assert await store.is_processed("telegram:update:1") is False

    assert await store.mark_processed("telegram:update:1") is True
    assert await store.mark_processed("telegram:update:1") is False

    assert await store.is_processed("telegram:update:1") is True
    assert await store.is_processed("telegram:update:2") is False


async def test_concurrent_mark_processed_has_one_winner(store: Store) -> None:
    results = await asyncio.gather(*(store.mark_processed("slack:evt:9") for _ in range(10)))

    assert results.count(True) == 1
    assert await store.is_processed("slack:evt:9") is True


# Cost ledger


def _cost(
    session_id: str,
    cost_usd: float | None,
    *,
    at: datetime = START,
    model: str = "claude-sonnet-4-5",
    usage: Usage | None = None,
) -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="run-1",
        provider="anthropic",
        model=model,
        usage=usage if usage is not None else Usage(input_tokens=10, output_tokens=5),
        cost_usd=cost_usd,
        at=at,
    )


async def test_empty_ledger_sums_to_zero(store: Store) -> None:
    session = await store.current_session("terminal")

    assert await store.cost_summary() == CostSummary()
    assert await store.cost_summary(session.id) == CostSummary(session_id=session.id)
    assert await store.cost_summary("nosuchsessio") == CostSummary(session_id="nosuchsessio")
    assert await store.costs_by_session() == []


async def test_cost_summary_totals_known_costs_and_counts_unpriced_calls(store: Store) -> None:
    session = await store.current_session("terminal")
    await store.record_cost(_cost(session.id, 0.25))
    await store.record_cost(_cost(session.id, None, model="mystery-1"))
    await store.record_cost(_cost(session.id, 0.5))
    await store.record_cost(_cost(session.id, None, model="mystery-1"))
    await store.record_cost(_cost(session.id, 0.0, model="demo-1"))

    summary = await store.cost_summary(session.id)

    assert summary.session_id == session.id
    assert summary.calls == 5
    assert summary.cost_usd == pytest.approx(0.75)
    # A zero-priced call is known to be free; only missing prices are unpriced.
    assert summary.unpriced_calls == 2


async def test_cost_summary_sums_every_token_kind(store: Store) -> None:
    session = await store.current_session("terminal")
    await store.record_cost(
        _cost(
            session.id,
            0.01,
            usage=Usage(
                input_tokens=100, output_tokens=20, cache_read_tokens=3000, cache_write_tokens=400
            ),
        )
    )
    await store.record_cost(
        _cost(
            session.id,
            None,
            usage=Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4),
        )
    )

    summary = await store.cost_summary(session.id)

    assert summary.usage == Usage(
        input_tokens=101, output_tokens=22, cache_read_tokens=3003, cache_write_tokens=404
    )


async def test_cost_summary_per_session_and_for_all(store: Store) -> None:
    a = await store.create_session("a")
    b = await store.create_session("b")
    await store.record_cost(_cost(a.id, 1.0, usage=Usage(input_tokens=100)))
    await store.record_cost(_cost(a.id, None, usage=Usage(output_tokens=7)))
    await store.record_cost(_cost(b.id, 2.5, usage=Usage(input_tokens=50, cache_read_tokens=9)))

    only_a = await store.cost_summary(a.id)
    only_b = await store.cost_summary(b.id)
    everything = await store.cost_summary()

    assert (only_a.calls, only_a.unpriced_calls) == (2, 1)
    assert only_a.cost_usd == pytest.approx(1.0)
    assert only_a.usage == Usage(input_tokens=100, output_tokens=7)
    assert (only_b.calls, only_b.unpriced_calls) == (1, 0)
    assert only_b.cost_usd == pytest.approx(2.5)
    assert everything.session_id is None
    assert (everything.calls, everything.unpriced_calls) == (3, 1)
    assert everything.cost_usd == pytest.approx(3.5)
    assert everything.usage == Usage(input_tokens=150, output_tokens=7, cache_read_tokens=9)


async def test_costs_by_session_latest_charge_first(store: Store) -> None:
    a, b, c, idle = [await store.create_session(key) for key in ("a", "b", "c", "idle")]
    minute = timedelta(minutes=1)
    # Recorded out of time order: the ledger orders by `at`, not by when the row was written.
    await store.record_cost(_cost(a.id, 1.0, at=START + 5 * minute))
    await store.record_cost(_cost(b.id, 2.0, at=START + 3 * minute))
    await store.record_cost(_cost(c.id, None, at=START + 4 * minute))
    await store.record_cost(_cost(a.id, 0.5, at=START + 1 * minute))
    await store.record_cost(_cost(b.id, 0.25, at=START))

    listed = await store.costs_by_session()

    assert [s.session_id for s in listed] == [a.id, c.id, b.id]
    assert idle.id not in {s.session_id for s in listed}
    by_id = {s.session_id: s for s in listed}
    assert by_id[a.id].calls == 2 and by_id[a.id].cost_usd == pytest.approx(1.5)
    assert by_id[b.id].calls == 2 and by_id[b.id].cost_usd == pytest.approx(2.25)
    assert by_id[c.id].unpriced_calls == 1 and by_id[c.id].cost_usd == 0.0
    assert listed[0] == await store.cost_summary(a.id)


async def test_costs_by_session_tie_goes_to_the_later_recorded_session(store: Store) -> None:
    a, b, c = [await store.create_session(key) for key in ("a", "b", "c")]
    await store.record_cost(_cost(b.id, 1.0))
    await store.record_cost(_cost(a.id, 1.0))
    await store.record_cost(_cost(c.id, 1.0))
    await store.record_cost(_cost(b.id, 1.0))

    listed = await store.costs_by_session()

    assert [s.session_id for s in listed] == [b.id, c.id, a.id]


async def test_costs_by_session_honours_limit(store: Store) -> None:
    sessions = [await store.create_session(f"key{i}") for i in range(4)]
    for i, session in enumerate(sessions):
        await store.record_cost(_cost(session.id, 0.1, at=START + timedelta(seconds=i)))

    listed = await store.costs_by_session(limit=2)

    assert [s.session_id for s in listed] == [sessions[3].id, sessions[2].id]
    assert await store.costs_by_session(limit=0) == []


async def test_record_cost_for_unknown_session_raises_store_error(store: Store) -> None:
    session = await store.current_session("terminal")

    with pytest.raises(StoreError, match="nosuchsessio"):
        await store.record_cost(_cost("nosuchsessio", 1.0))

    assert await store.cost_summary() == CostSummary()
    assert await store.costs_by_session() == []
    await store.record_cost(_cost(session.id, 1.0))
    assert (await store.cost_summary()).calls == 1


# Schedules and their runs

HOUR = timedelta(hours=1)
TELEGRAM_CHAT = Address(platform="telegram", chat="42")


def _schedule(
    schedule_id: str = "sched-1",
    *,
    owner: str = "telegram:7",
    deliver_to: Address = TELEGRAM_CHAT,
    status: ScheduleStatus = "active",
    next_run_at: datetime | None = START,
    created_at: datetime = START,
    cadence: Cadence | None = None,
) -> Schedule:
    return Schedule(
        id=schedule_id,
        cadence=cadence if cadence is not None else IntervalCadence(seconds=3600, start=START),
        prompt="What is on my calendar today?",
        deliver_to=deliver_to,
        owner=owner,
        status=status,
        next_run_at=next_run_at,
        created_at=created_at,
        updated_at=created_at,
    )


def _run(
    run_id: str,
    *,
    schedule_id: str = "sched-1",
    started_at: datetime = START,
    status: RunStatus = "running",
) -> ScheduleRun:
    return ScheduleRun(
        id=run_id,
        schedule_id=schedule_id,
        due_at=started_at,
        started_at=started_at,
        status=status,
    )


async def test_every_cadence_and_schedule_field_round_trips(store: Store) -> None:
    plus_two = datetime.fromisoformat("2025-03-01T14:30:00.123456+02:00")
    cadences: list[Cadence] = [
        OnceCadence(at=plus_two),
        IntervalCadence(seconds=90, start=START - HOUR),
        CronCadence(expression="30 8 * * 1-5", timezone="Europe/Berlin"),
    ]
    saved = [
        Schedule(
            id=f"sched-{cadence.kind}",
            cadence=cadence,
            prompt=f"Remind me ({cadence.kind})",
            deliver_to=Address(platform="slack", bot="work", chat="C1", thread="T9"),
            notify="conditional",
            owner="slack:U1",
            owner_is_admin=True,
            status="paused",
            next_run_at=plus_two + HOUR,
            misfire="run_once",
            grace_seconds=45,
            consecutive_failures=2,
            created_at=START + i * HOUR,
            updated_at=START + (i + 1) * HOUR,
        )
        for i, cadence in enumerate(cadences)
    ]
    for schedule in saved:
        await store.save_schedule(schedule)

    for schedule in saved:
        found = await store.get_schedule(schedule.id)
        assert found == schedule
        assert found is not None and found.cadence.kind == schedule.cadence.kind
    assert await store.list_schedules() == saved
    assert await store.get_schedule("nosuchsched") is None


async def test_saving_a_schedule_again_replaces_it(store: Store) -> None:
    first = _schedule(owner="telegram:7")
    await store.save_schedule(first)
    changed = first.model_copy(
        update={
            "owner": "telegram:8",
            "prompt": "Something else",
            "cadence": CronCadence(expression="0 9 * * *", timezone="Asia/Tokyo"),
            "updated_at": START + HOUR,
        }
    )

    await store.save_schedule(changed)

    assert await store.get_schedule(first.id) == changed
    assert await store.list_schedules() == [changed]
    assert await store.list_schedules(owner="telegram:7") == []
    assert await store.list_schedules(owner="telegram:8") == [changed]


async def test_list_schedules_oldest_first_by_owner_and_by_delivery(store: Store) -> None:
    in_thread = Address(platform="telegram", chat="42", thread="topic-1")
    other_chat = Address(platform="telegram", chat="43")
    other_platform = Address(platform="slack", chat="42")
    # Saved out of creation order: listing orders by `created_at`, not by when it was saved.
    c = _schedule("c", owner="telegram:7", created_at=START + 2 * HOUR)
    a = _schedule("a", owner="telegram:7", created_at=START)
    d = _schedule("d", owner="telegram:9", deliver_to=in_thread, created_at=START + 3 * HOUR)
    b = _schedule("b", owner="telegram:9", deliver_to=other_chat, created_at=START + HOUR)
    e = _schedule("e", owner="cli", deliver_to=other_platform, created_at=START + 4 * HOUR)
    for schedule in (c, a, d, b, e):
        await store.save_schedule(schedule)

    assert await store.list_schedules() == [a, b, c, d, e]
    assert await store.list_schedules(owner="telegram:7") == [a, c]
    assert await store.list_schedules(owner="telegram:9") == [b, d]
    assert await store.list_schedules(owner="nobody") == []
    assert await store.list_schedules(deliver_to=TELEGRAM_CHAT) == [a, c]
    # The thread tells deliveries apart; the bot does not.
    assert await store.list_schedules(deliver_to=in_thread) == [d]
    other_bot = TELEGRAM_CHAT.model_copy(update={"bot": "helper"})
    assert await store.list_schedules(deliver_to=other_bot) == [a, c]
    assert await store.list_schedules(deliver_to=other_platform) == [e]
    assert await store.list_schedules(owner="telegram:9", deliver_to=other_chat) == [b]
    assert await store.list_schedules(owner="telegram:7", deliver_to=other_chat) == []


async def test_list_schedules_of_an_empty_store_is_empty(store: Store) -> None:
    assert await store.list_schedules() == []
    assert await store.due_schedules(START) == []


async def test_delete_schedule_removes_it_with_its_runs(store: Store) -> None:
    doomed = _schedule("doomed")
    kept = _schedule("kept")
    for schedule in (doomed, kept):
        await store.save_schedule(schedule)
        await store.save_run(_run(f"{schedule.id}-run", schedule_id=schedule.id))

    assert await store.delete_schedule("doomed") is True

    assert await store.get_schedule("doomed") is None
    assert await store.list_schedules() == [kept]
    assert await store.list_schedules(owner=doomed.owner) == [kept]
    assert await store.due_schedules(START) == [kept]
    assert await store.list_runs("doomed") == []
    assert [r.id for r in await store.list_runs("kept")] == ["kept-run"]
    assert await store.delete_schedule("doomed") is False
    assert await store.delete_schedule("nosuchsched") is False
    # The id can be used again, and starts without the old runs.
    await store.save_schedule(doomed)
    assert await store.list_runs("doomed") == []


async def test_due_schedules_are_active_and_not_after_now(store: Store) -> None:
    now = START + HOUR
    due = [
        _schedule("at-now", next_run_at=now),
        _schedule("earlier", next_run_at=now - timedelta(microseconds=1)),
        _schedule("long-ago", next_run_at=START - 24 * HOUR),
    ]
    not_due = [
        _schedule("later", next_run_at=now + timedelta(microseconds=1)),
        _schedule("no-next-run", next_run_at=None, status="completed"),
        _schedule("active-without-next-run", next_run_at=None),
        _schedule("paused", status="paused"),
        _schedule("completed", status="completed"),
        _schedule("disabled", status="disabled"),
    ]
    for schedule in [*not_due, *due]:
        await store.save_schedule(schedule)

    found = await store.due_schedules(now)

    assert [s.id for s in found] == ["long-ago", "earlier", "at-now"]
    assert found[0] == due[2]


async def test_due_schedules_at_the_same_time_go_oldest_first_up_to_limit(
    store: Store,
) -> None:
    ids = ["young", "old", "middle", "earliest-due"]
    created = [START + 3 * HOUR, START, START + HOUR, START + 2 * HOUR]
    due_at = [START, START, START, START - HOUR]
    for schedule_id, created_at, next_run_at in zip(ids, created, due_at, strict=True):
        await store.save_schedule(
            _schedule(schedule_id, created_at=created_at, next_run_at=next_run_at)
        )

    assert [s.id for s in await store.due_schedules(START)] == [
        "earliest-due",
        "old",
        "middle",
        "young",
    ]
    assert [s.id for s in await store.due_schedules(START, limit=2)] == ["earliest-due", "old"]
    assert await store.due_schedules(START, limit=0) == []


async def test_saving_a_schedule_again_moves_it_in_and_out_of_due(store: Store) -> None:
    schedule = _schedule(next_run_at=START)
    await store.save_schedule(schedule)
    assert [s.id for s in await store.due_schedules(START)] == [schedule.id]

    await store.save_schedule(schedule.model_copy(update={"status": "paused"}))
    assert await store.due_schedules(START) == []

    resumed = schedule.model_copy(update={"next_run_at": START + HOUR})
    await store.save_schedule(resumed)
    assert await store.due_schedules(START) == []
    assert await store.due_schedules(START + HOUR) == [resumed]

    await store.save_schedule(resumed.model_copy(update={"next_run_at": None}))
    assert await store.due_schedules(START + 24 * HOUR) == []


async def test_due_schedules_compares_instants_across_time_zones(store: Store) -> None:
    # 13:30+02:00 is 11:30 UTC: due at noon UTC, before a schedule due at 11:45 UTC.
    east = _schedule("east", next_run_at=datetime.fromisoformat("2025-03-01T13:30:00+02:00"))
    utc = _schedule("utc", next_run_at=START - timedelta(minutes=15))
    for schedule in (utc, east):
        await store.save_schedule(schedule)

    found = await store.due_schedules(datetime.fromisoformat("2025-03-01T07:00:00-05:00"))

    assert [s.id for s in found] == ["east", "utc"]


async def test_a_run_is_saved_replaced_and_listed(store: Store) -> None:
    await store.save_schedule(_schedule())
    running = _run("run-1")
    await store.save_run(running)
    assert await store.list_runs("sched-1") == [running]

    finished = running.model_copy(
        update={
            "status": "succeeded",
            "finished_at": START + timedelta(seconds=12),
            "output": "Three meetings.",
            "delivered": True,
            "duration_ms": 12000.5,
            "cost_usd": 0.0042,
        }
    )
    await store.save_run(finished)

    assert await store.list_runs("sched-1") == [finished]
    failed = _run("run-2", started_at=START + HOUR, status="failed").model_copy(
        update={"error": "provider down", "cost_usd": None}
    )
    await store.save_run(failed)
    assert await store.list_runs("sched-1") == [failed, finished]


async def test_saving_a_schedule_again_keeps_its_runs(store: Store) -> None:
    schedule = _schedule()
    await store.save_schedule(schedule)
    await store.save_run(_run("run-1"))

    await store.save_schedule(schedule.model_copy(update={"consecutive_failures": 1}))

    assert [r.id for r in await store.list_runs(schedule.id)] == ["run-1"]


async def test_runs_list_newest_first_per_schedule_up_to_limit(store: Store) -> None:
    await store.save_schedule(_schedule("a"))
    await store.save_schedule(_schedule("b"))
    # Saved out of order: runs list by `started_at`.
    for minutes in (3, 0, 4, 1, 2):
        await store.save_run(
            _run(f"a-{minutes}", schedule_id="a", started_at=START + timedelta(minutes=minutes))
        )
    await store.save_run(_run("b-0", schedule_id="b", started_at=START + HOUR))

    assert [r.id for r in await store.list_runs("a")] == ["a-4", "a-3", "a-2", "a-1", "a-0"]
    assert [r.id for r in await store.list_runs("a", limit=2)] == ["a-4", "a-3"]
    assert await store.list_runs("a", limit=0) == []
    assert [r.id for r in await store.list_runs("b")] == ["b-0"]
    assert await store.list_runs("nosuchsched") == []


async def test_prune_runs_keeps_the_newest(store: Store) -> None:
    await store.save_schedule(_schedule("a"))
    await store.save_schedule(_schedule("b"))
    for minutes in (3, 0, 4, 1, 2):
        await store.save_run(
            _run(f"a-{minutes}", schedule_id="a", started_at=START + timedelta(minutes=minutes))
        )
    await store.save_run(_run("b-0", schedule_id="b"))

    assert await store.prune_runs("a", keep=2) == 3

    assert [r.id for r in await store.list_runs("a")] == ["a-4", "a-3"]
    assert await store.prune_runs("a", keep=2) == 0
    assert await store.prune_runs("a", keep=5) == 0
    assert [r.id for r in await store.list_runs("b")] == ["b-0"]
    assert await store.prune_runs("a", keep=0) == 2
    assert await store.list_runs("a") == []
    assert await store.prune_runs("nosuchsched", keep=0) == 0
    # A pruned run id can be saved again.
    await store.save_run(_run("a-0", schedule_id="a"))
    assert [r.id for r in await store.list_runs("a")] == ["a-0"]


async def test_a_run_of_an_unknown_schedule_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="nosuchsched"):
        await store.save_run(_run("run-1", schedule_id="nosuchsched"))

    assert await store.list_runs("nosuchsched") == []


async def test_naive_schedule_times_are_refused(store: Store) -> None:
    naive = datetime(2025, 3, 1, 12, 0)  # noqa: DTZ001
    refused = [
        _schedule("naive-next", next_run_at=naive),
        _schedule("naive-created", created_at=naive),
        _schedule("naive-once", cadence=OnceCadence(at=naive)),
        _schedule("naive-start", cadence=IntervalCadence(seconds=60, start=naive)),
    ]
    for schedule in refused:
        with pytest.raises(StoreError, match="naive"):
            await store.save_schedule(schedule)
    assert await store.list_schedules() == []

    await store.save_schedule(_schedule())
    with pytest.raises(StoreError, match="naive"):
        await store.save_run(_run("run-1", started_at=naive))
    with pytest.raises(StoreError, match="naive"):
        await store.save_run(_run("run-2").model_copy(update={"finished_at": naive}))
    with pytest.raises(StoreError, match="naive"):
        await store.due_schedules(naive)
    assert await store.list_runs("sched-1") == []


async def test_negative_limits_are_refused(store: Store) -> None:
    await store.save_schedule(_schedule())

    with pytest.raises(ValueError, match="limit"):
        await store.list_runs("sched-1", limit=-1)
    with pytest.raises(ValueError, match="limit"):
        await store.due_schedules(START, limit=-1)
    with pytest.raises(ValueError, match="keep"):
        await store.prune_runs("sched-1", keep=-1)


# Remembered facts

ALICE = "default:telegram:1"
BOB = "default:telegram:2"


def _fact(
    fact_id: str, text: str, *, scope: str = ALICE, minutes: int = 0, session: str | None = "s1"
) -> MemoryFact:
    return MemoryFact(
        id=fact_id,
        scope=scope,
        text=text,
        created_at=START + timedelta(minutes=minutes),
        source_session=session,
    )


async def _remember(store: Store, *facts: MemoryFact) -> None:
    for fact in facts:
        await store.remember_fact(fact)


def _ids(facts: list[MemoryFact]) -> list[str]:
    return [f.id for f in facts]


async def test_remembered_facts_list_newest_first_up_to_limit(store: Store) -> None:
    tokyo = datetime.fromisoformat("2025-03-01T21:30:00+09:00")  # 12:30 UTC
    await _remember(
        store,
        _fact("f1", "Likes green tea", minutes=10),
        _fact("f2", "Lives in Lyon", minutes=40, session=None),
        _fact("f3", "Has a dog called Rex").model_copy(update={"created_at": tokyo}),
    )

    listed = await store.list_facts(ALICE)

    assert _ids(listed) == ["f2", "f3", "f1"]
    assert listed[0] == _fact("f2", "Lives in Lyon", minutes=40, session=None)
    assert listed[1].created_at == tokyo and _is_utc(listed[1].created_at)
    assert _ids(await store.list_facts(ALICE, limit=2)) == ["f2", "f3"]
    assert await store.list_facts(ALICE, limit=0) == []
    assert await store.list_facts("default:telegram:nobody") == []


async def test_facts_of_equal_times_list_greater_id_first(store: Store) -> None:
    await _remember(store, _fact("a", "one"), _fact("c", "three"), _fact("b", "two"))

    assert _ids(await store.list_facts(ALICE)) == ["c", "b", "a"]


async def test_facts_never_leave_their_scope(store: Store) -> None:
    other_bot = "helper:telegram:1"
    await _remember(
        store,
        _fact("a1", "Favourite colour is blue"),
        _fact("b1", "Favourite colour is red", scope=BOB),
        _fact("h1", "Favourite colour is green", scope=other_bot),
    )

    assert _ids(await store.search_facts(ALICE, "favourite colour")) == ["a1"]
    assert _ids(await store.search_facts(BOB, "colour")) == ["b1"]
    assert _ids(await store.search_facts(other_bot, "colo")) == ["h1"]
    assert _ids(await store.list_facts(BOB)) == ["b1"]
    assert await store.search_facts(ALICE, "red") == []


async def test_search_ranks_facts_matching_more_terms_first(store: Store) -> None:
    await _remember(
        store,
        _fact("both", "Drinks coffee with oat milk every morning", minutes=1),
        _fact("coffee", "Coffee gives them headaches", minutes=2),
        _fact("tea", "Prefers tea in the evening", minutes=3),
    )

    found = await store.search_facts(ALICE, "Do they take oat milk in their coffee?")

    assert _ids(found) == ["both", "coffee"]
    assert _ids(await store.search_facts(ALICE, "oat milk coffee", limit=1)) == ["both"]
    assert await store.search_facts(ALICE, "coffee", limit=0) == []


async def test_search_ties_go_newest_first(store: Store) -> None:
    await _remember(
        store,
        _fact("old", "The cat is called Tom", minutes=1),
        _fact("new", "The cat is called Bob", minutes=2),
    )

    assert _ids(await store.search_facts(ALICE, "cat")) == ["new", "old"]


async def test_search_without_terms_lists_the_newest_facts(store: Store) -> None:
    await _remember(
        store,
        _fact("f1", "Speaks Italian", minutes=1),
        _fact("f2", "Works nights", minutes=2),
        _fact("f3", "It is what it is", minutes=3),
    )

    for query in ("", "   ", "what is it?", "a", "!!! -- ***"):
        assert _ids(await store.search_facts(ALICE, query, limit=2)) == ["f3", "f2"], query
    assert _ids(await store.search_facts(ALICE, "what")) == ["f3", "f2", "f1"]


async def test_the_last_search_term_also_matches_as_a_prefix(store: Store) -> None:
    await _remember(
        store,
        _fact("coffee", "Loves coffee", minutes=1),
        _fact("cola", "Drinks cola", minutes=2),
    )

    assert _ids(await store.search_facts(ALICE, "coff")) == ["coffee"]
    assert _ids(await store.search_facts(ALICE, "drinks col")) == ["cola"]
    # Only the last term, and only from three characters on.
    assert _ids(await store.search_facts(ALICE, "coff drinks")) == ["cola"]
    assert await store.search_facts(ALICE, "co") == []


async def test_search_folds_case_and_latin_diacritics(store: Store) -> None:
    await _remember(
        store,
        _fact("munich", "Lives in München", minutes=1),
        _fact("cafe", "Runs a CAFÉ near the station", minutes=2),
        _fact("moscow", "Was born in Москва", minutes=3),
        _fact("tokyo", "Visited 東京 last year", minutes=4),
    )

    assert _ids(await store.search_facts(ALICE, "munchen")) == ["munich"]
    assert _ids(await store.search_facts(ALICE, "MÜNCHEN")) == ["munich"]
    # The same word with its umlaut as a separate combining mark.
    assert _ids(await store.search_facts(ALICE, "Mu\u0308nchen")) == ["munich"]
    assert _ids(await store.search_facts(ALICE, "café")) == ["cafe"]
    assert _ids(await store.search_facts(ALICE, "cafe")) == ["cafe"]
    assert _ids(await store.search_facts(ALICE, "москва")) == ["moscow"]
    assert _ids(await store.search_facts(ALICE, "東京")) == ["tokyo"]
    [found] = await store.search_facts(ALICE, "munchen")
    assert found.text == "Lives in München"


async def test_query_syntax_is_searched_as_words(store: Store) -> None:
    await _remember(store, _fact("f1", 'Calls the "near" shop "Corner*Mart"', minutes=1))
    queries = [
        '"',
        '""',
        "*",
        "NEAR(",
        "NEAR(a b, 2)",
        "-",
        "- near",
        "near -shop",
        '" OR 1=1 --',
        "text: shop",
        "{text}: shop",
        "^shop",
        "(shop",
        "shop)",
        "shop AND",
        "OR",
        "NOT shop",
        "corner*",
        "\x00 shop",
    ]
    for query in queries:
        found = await store.search_facts(ALICE, query)
        assert _ids(found) == ["f1"], query
    assert await store.search_facts(ALICE, "'; DROP TABLE memory_facts; --") == []
    assert _ids(await store.list_facts(ALICE)) == ["f1"]


async def test_forget_works_only_within_the_scope(store: Store) -> None:
    await _remember(
        store,
        _fact("f1", "Allergic to peanuts", minutes=1),
        _fact("f2", "Allergic to cats", minutes=2),
        _fact("f1", "Allergic to peanuts", scope=BOB, minutes=1),
    )

    assert await store.forget_fact(BOB, "f2") is False
    assert await store.forget_fact(ALICE, "f1") is True
    assert await store.forget_fact(ALICE, "f1") is False
    assert await store.forget_fact(ALICE, "nosuchfact") is False

    assert _ids(await store.list_facts(ALICE)) == ["f2"]
    assert _ids(await store.search_facts(ALICE, "allergic peanuts")) == ["f2"]
    assert await store.search_facts(ALICE, "peanuts") == []
    assert await store.search_facts(ALICE, "pean") == []
    assert _ids(await store.search_facts(BOB, "peanuts")) == ["f1"]
    # A forgotten id can be used again.
    await store.remember_fact(_fact("f1", "Allergic to bees", minutes=3))
    assert _ids(await store.search_facts(ALICE, "bees")) == ["f1"]


async def test_a_fact_of_stop_words_only_is_kept_and_forgotten(store: Store) -> None:
    await store.remember_fact(_fact("f1", "It is what it is"))

    assert _ids(await store.list_facts(ALICE)) == ["f1"]
    assert await store.forget_fact(ALICE, "f1") is True
    assert await store.list_facts(ALICE) == []


async def test_remembering_a_fact_again_changes_nothing(store: Store) -> None:
    fact = _fact("f1", "Likes jazz")
    await store.remember_fact(fact)
    await store.remember_fact(fact)

    assert await store.list_facts(ALICE) == [fact]
    with pytest.raises(StoreError, match="f1"):
        await store.remember_fact(_fact("f1", "Likes techno"))
    assert await store.list_facts(ALICE) == [fact]
    assert _ids(await store.search_facts(ALICE, "jazz")) == ["f1"]
    assert await store.search_facts(ALICE, "techno") == []


async def test_long_facts_round_trip(store: Store) -> None:
    text = ("Notes: " + "ünïcödé words and numbers 12345 " * 40)[:MAX_FACT_CHARS]
    fact = _fact("long", text)
    await store.remember_fact(fact)

    assert await store.list_facts(ALICE) == [fact]
    assert _ids(await store.search_facts(ALICE, "unicode 12345")) == ["long"]


async def test_naive_fact_times_are_refused(store: Store) -> None:
    naive = datetime(2025, 3, 1, 12, 0)  # noqa: DTZ001
    with pytest.raises(StoreError, match="naive"):
        await store.remember_fact(_fact("f1", "x").model_copy(update={"created_at": naive}))

    assert await store.list_facts(ALICE) == []


async def test_negative_fact_limits_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="limit"):
        await store.search_facts(ALICE, "x", limit=-1)
    with pytest.raises(ValueError, match="limit"):
        await store.list_facts(ALICE, limit=-1)


# Compaction summaries


async def test_a_session_without_summaries_has_none(store: Store) -> None:
    session = await store.current_session("terminal")

    assert await store.latest_summary(session.id) is None
    assert await store.latest_summary("nosuchsessio") is None


async def test_the_latest_summary_has_the_highest_marker_and_the_history_stays(
    store: Store,
) -> None:
    session = await store.current_session("terminal")
    other = await store.create_session("other")
    for i in range(1, 7):
        await store.append_message(session.id, Message.user(f"m{i}"))
    first = CompactionSummary(up_to_seq=2, text="We said hello.", created_at=START)
    second = CompactionSummary(
        up_to_seq=4, text="We said hello twice. 😀", created_at=START + timedelta(minutes=1)
    )

    await store.save_summary(session.id, first)
    assert await store.latest_summary(session.id) == first
    await store.save_summary(session.id, second)
    await store.save_summary(session.id, first)

    assert await store.latest_summary(session.id) == second
    assert await store.latest_summary(other.id) is None
    assert [m.seq for m in await store.list_messages(session.id)] == [1, 2, 3, 4, 5, 6]


async def test_a_summary_for_the_same_marker_replaces_the_stored_one(store: Store) -> None:
    session = await store.current_session("terminal")
    await store.save_summary(
        session.id, CompactionSummary(up_to_seq=3, text="old", created_at=START)
    )
    again = CompactionSummary(up_to_seq=3, text="new", created_at=START + timedelta(hours=1))

    await store.save_summary(session.id, again)
    await store.save_summary(session.id, again)

    found = await store.latest_summary(session.id)
    assert found == again
    assert found is not None and _is_utc(found.created_at)


async def test_summaries_of_unknown_sessions_and_naive_times_are_refused(store: Store) -> None:
    session = await store.current_session("terminal")

    with pytest.raises(StoreError):
        await store.save_summary(
            "nosuchsessio", CompactionSummary(up_to_seq=1, text="x", created_at=START)
        )
    with pytest.raises(StoreError):
        await store.save_summary(
            session.id,
            CompactionSummary(up_to_seq=1, text="x", created_at=START.replace(tzinfo=None)),
        )
    assert await store.latest_summary(session.id) is None


def _checkpoint(number: int, *, started: datetime = START, **changes: object) -> Checkpoint:
    inbound = Inbound(
        address=Address(platform="telegram", bot="b", chat="c1"),
        user_id="u1",
        text=f"question {number}",
        platform_message_id=str(number),
        received_at=started,
    )
    base = Checkpoint(
        run_key=inbound.dedupe_key,
        session_id="sess",
        inbound=inbound,
        started_at=started,
        updated_at=started,
    )
    return base.model_copy(update=changes)


async def test_a_saved_checkpoint_reads_back_and_a_save_replaces_it(store: Store) -> None:
    first = _checkpoint(1)
    await store.save_checkpoint(first)
    assert await store.get_checkpoint(first.run_key) == first
    assert await store.get_checkpoint("nosuchrun") is None

    bumped = first.model_copy(update={"tool_rounds": 2, "updated_at": START + timedelta(1)})
    await store.save_checkpoint(bumped)
    await store.save_checkpoint(bumped)

    found = await store.get_checkpoint(first.run_key)
    assert found == bumped
    assert found is not None and _is_utc(found.updated_at)
    assert found.inbound.text == "question 1"


async def test_incomplete_checkpoints_are_the_running_ones_oldest_first(store: Store) -> None:
    later = _checkpoint(1, started=START + timedelta(minutes=5))
    earlier = _checkpoint(2, started=START)
    done = _checkpoint(3, started=START)
    for checkpoint in (later, earlier, done):
        await store.save_checkpoint(checkpoint)

    assert await store.finish_checkpoint(done.run_key, "completed")
    assert not await store.finish_checkpoint("nosuchrun", "abandoned")

    assert [c.run_key for c in await store.incomplete_checkpoints()] == [
        earlier.run_key,
        later.run_key,
    ]
    finished = await store.get_checkpoint(done.run_key)
    assert finished is not None and finished.status == "completed"


async def test_incomplete_checkpoints_older_than_leave_out_recent_ones(store: Store) -> None:
    stale = _checkpoint(1, started=START)
    fresh = _checkpoint(2, started=START + timedelta(minutes=10))
    await store.save_checkpoint(stale)
    await store.save_checkpoint(fresh)

    cutoff = START + timedelta(minutes=5)
    assert [c.run_key for c in await store.incomplete_checkpoints(older_than=cutoff)] == [
        stale.run_key
    ]
    assert await store.incomplete_checkpoints(older_than=START) == []
    with pytest.raises(StoreError):
        await store.incomplete_checkpoints(older_than=cutoff.replace(tzinfo=None))


async def test_an_abandoned_checkpoint_is_no_longer_incomplete(store: Store) -> None:
    checkpoint = _checkpoint(1)
    await store.save_checkpoint(checkpoint)

    assert await store.finish_checkpoint(checkpoint.run_key, "abandoned")

    assert await store.incomplete_checkpoints() == []
    found = await store.get_checkpoint(checkpoint.run_key)
    assert found is not None and found.status == "abandoned"


async def test_a_checkpoint_with_a_naive_time_is_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.save_checkpoint(_checkpoint(1, updated_at=START.replace(tzinfo=None)))
    assert await store.incomplete_checkpoints() == []
