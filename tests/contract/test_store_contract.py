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

from core.errors import StoreError
from core.messages import ImagePart, Message, TextPart, ToolCall, Usage
from core.store import CostEntry, CostSummary, RedisStore, SqliteStore, Store

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
