"""The cost ledger contract (`CostLedger`). Costs belong to the log's sessions, so the cases take
the composite store.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest

from core.errors import StoreError
from core.messages import Usage
from core.store import CostEntry, CostSummary, Store
from tests.contract.store_support import START

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


async def test_a_cost_that_is_not_a_finite_number_is_refused(store: Store) -> None:
    """SQLite stores NaN as NULL, which would turn a broken price into an "unpriced" call."""
    session = await store.create_session("terminal")

    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            await store.record_cost(_cost(session.id, bad))
    assert (await store.cost_summary()).calls == 0


async def test_a_naive_cost_time_is_refused(store: Store) -> None:
    session = await store.create_session("terminal")

    with pytest.raises(StoreError, match="naive"):
        await store.record_cost(_cost(session.id, 1.0, at=START.replace(tzinfo=None)))
    assert (await store.cost_summary()).calls == 0


async def test_cost_times_in_other_zones_order_by_instant(store: Store) -> None:
    """13:00+02:00 is 11:00 UTC, earlier than 12:00 UTC."""
    east = await store.create_session("east")
    utc = await store.create_session("utc")
    await store.record_cost(_cost(utc.id, 1.0, at=START))
    await store.record_cost(
        _cost(east.id, 1.0, at=datetime.fromisoformat("2025-03-01T13:00:00+02:00"))
    )

    listed = await store.costs_by_session()

    assert [s.session_id for s in listed] == [utc.id, east.id]


# Spending per person, per chat, per day (issue 17: the budgets and `cost --by`)


def _spent(
    session_id: str,
    cost_usd: float | None,
    *,
    user: str | None,
    chat: str | None,
    at: datetime = START,
    model: str = "claude-sonnet-4-5",
) -> CostEntry:
    return _cost(session_id, cost_usd, at=at, model=model).model_copy(
        update={"user": user, "chat": chat}
    )


async def test_daily_spend_counts_a_person_and_a_chat_across_sessions(store: Store) -> None:
    # `/new` starts another session for the same chat: the day's spend still adds up.
    first = await store.create_session("telegram:bot:42")
    second = await store.create_session("telegram:bot:42")
    other = await store.create_session("telegram:bot:77")
    chat, elsewhere = "telegram:bot:42", "telegram:bot:77"
    await store.record_cost(_spent(first.id, 0.25, user="telegram:1", chat=chat))
    await store.record_cost(_spent(second.id, 0.5, user="telegram:1", chat=chat))
    await store.record_cost(_spent(second.id, None, user="telegram:1", chat=chat))
    await store.record_cost(_spent(other.id, 1.0, user="telegram:2", chat=elsewhere))
    await store.record_cost(_spent(other.id, 2.0, user=None, chat=None))
    today = START.date()

    assert await store.daily_spend(today, user="telegram:1") == pytest.approx(0.75)
    assert await store.daily_spend(today, user="telegram:2") == pytest.approx(1.0)
    assert await store.daily_spend(today, chat=chat) == pytest.approx(0.75)
    assert await store.daily_spend(today, chat=elsewhere) == pytest.approx(1.0)
    assert await store.daily_spend(today) == pytest.approx(3.75)
    assert await store.daily_spend(today, user="telegram:nobody") == 0.0


async def test_spending_reads_the_session_and_every_daily_scope_at_once(store: Store) -> None:
    session = await store.create_session("telegram:bot:42")
    other = await store.create_session("telegram:bot:77")
    chat = "telegram:bot:42"
    await store.record_cost(_spent(session.id, 0.25, user="telegram:1", chat=chat))
    await store.record_cost(_spent(session.id, None, user="telegram:1", chat=chat))
    await store.record_cost(_spent(other.id, 1.0, user="telegram:2", chat="telegram:bot:77"))
    today = START.date()

    spent = await store.spending(today, session_id=session.id, user="telegram:1", chat=chat)
    nobody = await store.spending(
        today - timedelta(days=1), session_id="no-such-session", user=None, chat=None
    )

    assert spent.session == pytest.approx((await store.cost_summary(session.id)).cost_usd)
    assert (spent.session, spent.user_daily, spent.chat_daily) == pytest.approx((0.25,) * 3)
    assert spent.global_daily == pytest.approx(await store.daily_spend(today))
    assert spent.global_daily == pytest.approx(1.25)
    assert nobody == type(nobody)()


async def test_daily_spend_is_per_utc_day(store: Store) -> None:
    session = await store.create_session("telegram:bot:42")
    midnight = datetime(2025, 3, 2, tzinfo=START.tzinfo)
    tick = timedelta(microseconds=1)
    await store.record_cost(_spent(session.id, 0.25, user="u", chat="c", at=midnight - tick))
    await store.record_cost(_spent(session.id, 0.5, user="u", chat="c", at=midnight))

    assert await store.daily_spend(midnight.date() - timedelta(days=1), user="u") == 0.25
    assert await store.daily_spend(midnight.date(), user="u") == 0.5
    assert await store.daily_spend(midnight.date()) == 0.5
    assert await store.daily_spend(midnight.date() + timedelta(days=1)) == 0.0
    with pytest.raises(ValueError, match="not both"):
        await store.daily_spend(midnight.date(), user="u", chat="c")


async def test_costs_by_user_chat_model_costliest_first_and_day_newest_first(
    store: Store,
) -> None:
    session = await store.create_session("slack:bot:C1")
    day = timedelta(days=1)
    await store.record_cost(_spent(session.id, 0.25, user="slack:A", chat="slack:bot:C1"))
    await store.record_cost(
        _spent(session.id, 1.0, user="slack:B", chat="slack:bot:C1", at=START + day, model="m2")
    )
    await store.record_cost(_spent(session.id, 0.5, user="slack:A", chat="slack:bot:C2"))
    await store.record_cost(_spent(session.id, None, user=None, chat=None, model="m2"))

    by_user = await store.costs_by("user")
    by_chat = await store.costs_by("chat")
    by_day = await store.costs_by("day")
    by_model = await store.costs_by("model")

    assert [(g.key, g.cost_usd, g.calls) for g in by_user] == [
        ("slack:B", 1.0, 1),
        ("slack:A", 0.75, 2),
        ("", 0.0, 1),
    ]
    assert {g.by for g in by_user} == {"user"}
    assert [g.key for g in by_chat] == ["slack:bot:C1", "slack:bot:C2", ""]
    assert by_chat[0].cost_usd == pytest.approx(1.25)
    assert [(g.key, g.calls) for g in by_day] == [("2025-03-02", 1), ("2025-03-01", 3)]
    assert by_day[1].usage == Usage(input_tokens=30, output_tokens=15)
    assert by_day[1].unpriced_calls == 1
    assert [(g.key, g.cost_usd) for g in by_model] == [("claude-sonnet-4-5", 0.75), ("m2", 1.0)][
        ::-1
    ]
    assert [g.key for g in await store.costs_by("user", limit=1)] == ["slack:B"]
    assert await store.costs_by("model", limit=0) == []


async def test_cost_entries_come_back_in_the_order_recorded(store: Store) -> None:
    session = await store.current_session("terminal")
    other = await store.current_session("telegram:default:1")
    first = _cost(session.id, 0.25, at=START + timedelta(days=1))
    second = _cost(session.id, None, model="mystery-1", at=START)
    await store.record_cost(first)
    await store.record_cost(_cost(other.id, 1.0))
    await store.record_cost(second)

    assert await store.cost_entries(session.id) == [first, second]
    assert await store.cost_entries("nosuchsessio") == []


async def test_a_cost_recorded_again_under_its_id_is_counted_once(store: Store) -> None:
    session = await store.current_session("telegram:retry")
    entry = _cost(session.id, 0.5).model_copy(update={"id": "c-1"})

    await store.record_cost(entry)
    await store.record_cost(entry)
    await store.record_cost(_cost(session.id, 0.25))
    await store.record_cost(_cost(session.id, 0.25))

    summary = await store.cost_summary(session.id)
    assert summary.calls == 3
    assert summary.cost_usd == pytest.approx(1.0)
    assert [e.id for e in await store.cost_entries(session.id)] == ["c-1", None, None]


async def test_degraded_calls_are_kept_and_counted_once_per_turn(store: Store) -> None:
    session = await store.current_session("terminal")
    cheap = "gpt-4o-mini"
    for run_id, degraded, model in (
        ("run-1", False, "claude-sonnet-4-5"),
        ("run-2", True, cheap),
        ("run-2", True, cheap),  # a turn's second call counts to the same turn
        ("run-3", True, cheap),
    ):
        entry = _cost(session.id, 0.1, model=model)
        await store.record_cost(entry.model_copy(update={"run_id": run_id, "degraded": degraded}))

    assert [e.degraded for e in await store.cost_entries(session.id)] == [
        False,
        True,
        True,
        True,
    ]
    assert (await store.cost_summary()).degraded_turns == 2
    assert (await store.cost_summary(session.id)).degraded_turns == 2
    by_model = {group.key: group.degraded_turns for group in await store.costs_by("model")}
    assert by_model == {cheap: 2, "claude-sonnet-4-5": 0}
    [day] = await store.costs_by("day")
    assert (day.calls, day.degraded_turns) == (4, 2)
