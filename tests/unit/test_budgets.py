"""Layered budgets (issue 17, point 5): `BudgetGuard` against a real SQLite ledger, the
runtime refusing a model call over a limit, and admins told once per limit and day."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bots.limits import admin_dms, effective_budgets
from core.backends.sql.store import SqlStore
from core.budgets import BUDGET_REACHED, BudgetAlerts, BudgetGuard, Budgets, Spender, Verdict
from core.bus import EVENTS, outbound_queue
from core.envelopes import Address, EventEnvelope, Outbound
from core.errors import ConfigError
from core.events import Degraded, RunCompleted, RunFailed
from core.messages import Message, ToolCall, Usage
from core.model_choice import ModelChoices, ModelOption
from core.modes import ModeCatalog
from core.profile import Profile
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.store.ledger import CostEntry
from core.tools import ToolRegistry
from tests.backends.memory_bus import MemoryBus

NOON = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CHAT = Address(platform="telegram", bot="b", chat="42")


class Clock:
    """A clock moved by hand."""

    def __init__(self, now: datetime = NOON) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def spend(
    store: SqlStore,
    session_id: str,
    usd: float,
    *,
    user: str | None = "telegram:7",
    chat: str | None = "telegram:b:42",
    at: datetime = NOON,
) -> None:
    await store.record_cost(
        CostEntry(
            session_id=session_id,
            run_id="r",
            provider="p",
            model="m",
            usage=Usage(),
            cost_usd=usd,
            at=at,
            user=user,
            chat=chat,
        )
    )


async def test_a_person_s_daily_budget_counts_across_new_and_resets_at_utc_midnight(
    store: SqlStore,
) -> None:
    clock = Clock()
    guard = BudgetGuard(Budgets(per_user_daily=1.0), store, clock=clock)
    before_new = await store.create_session(CHAT.session_key)
    await spend(store, before_new.id, 0.75)
    after_new = await store.create_session(CHAT.session_key)
    spender = Spender(session_id=after_new.id, user="telegram:7", chat="telegram:b:42")

    assert await guard.check(spender) is None
    await spend(store, after_new.id, 0.25)
    hit = await guard.check(spender)

    assert hit is not None
    assert (hit.name, hit.limit_usd, hit.scope) == ("per_user_daily", 1.0, "telegram:7")
    assert hit.resets_at == datetime(2025, 3, 2, tzinfo=UTC)
    assert hit.sentence(clock.now) == (
        "You have reached your daily spending limit of $1.00; "
        "it resets at midnight UTC (in 12 h 0 min)."
    )
    # Someone else in another chat is not held back by this person's spending.
    other = Spender(session_id=after_new.id, user="telegram:8", chat="telegram:b:9")
    assert await guard.check(other) is None
    clock.now = datetime(2025, 3, 2, 0, 0, tzinfo=UTC)
    assert await guard.check(spender) is None


async def test_chat_global_session_and_schedule_run_limits_each_name_themselves(
    store: SqlStore,
) -> None:
    session = await store.create_session(CHAT.session_key)
    await spend(store, session.id, 0.5)
    await spend(store, session.id, 0.5, user="telegram:8", chat="telegram:b:99")
    me = Spender(session_id=session.id, user="telegram:7", chat="telegram:b:42")

    async def first_hit(budgets: Budgets, spender: Spender = me, run: float = 0.0) -> str:
        hit = await BudgetGuard(budgets, store, clock=Clock()).check(spender, run)
        assert hit is not None
        return hit.sentence(NOON)

    assert await first_hit(Budgets(per_chat_daily=0.5)) == (
        "This chat has reached its daily spending limit of $0.50; "
        "it resets at midnight UTC (in 12 h 0 min)."
    )
    assert (await first_hit(Budgets(global_daily=1.0))).startswith(
        "This bot has reached its daily spending limit of $1.00;"
    )
    assert await first_hit(Budgets(per_session=1.0)) == (
        "This conversation has reached its spending limit of $1.00. Send /new to start a fresh one."
    )
    scheduled = me.model_copy(update={"scheduled": True})
    assert "per run" in await first_hit(Budgets(per_schedule_run=0.01), scheduled, run=0.02)
    # A person's turn is not a schedule's run: that limit does not apply to it.
    guard = BudgetGuard(Budgets(per_schedule_run=0.01, per_chat_daily=5.0), store)
    assert await guard.check(me, 0.02) is None


async def test_admins_hear_of_a_limit_once_per_scope_and_day(
    store: SqlStore, bus: MemoryBus
) -> None:
    clock = Clock()
    session = await store.create_session(CHAT.session_key)
    await spend(store, session.id, 2.0)
    dms = admin_dms(["telegram:7", "discord:8", "terminal:local"])
    assert dms == [Address(platform="telegram", chat="7")]
    alerts = BudgetAlerts(bus, store, admin_dms=dms, clock=clock)
    guard = BudgetGuard(Budgets(global_daily=1.0), store, clock=clock, on_hit=alerts)
    me = Spender(session_id=session.id, user="telegram:7", chat="telegram:b:42")
    subscription = await bus.subscribe(EVENTS)
    events = aiter(subscription)
    try:
        assert await guard.check(me) is not None
        assert await guard.check(me) is not None
        clock.now += timedelta(days=1)
        await spend(store, session.id, 2.0, at=clock.now)
        assert await guard.check(me) is not None
        seen = [await asyncio.wait_for(anext(events), 5.0) for _ in range(2)]
    finally:
        await subscription.aclose()

    assert all(isinstance(e, EventEnvelope) and e.name == BUDGET_REACHED for e in seen)
    days = [e.data["resets_at"] for e in seen if isinstance(e, EventEnvelope)]
    assert days == ["2025-03-02T00:00:00Z", "2025-03-03T00:00:00Z"]
    notes: list[str] = []
    while delivery := await bus.receive(outbound_queue("telegram"), consumer="t", timeout=0):
        assert isinstance(delivery.envelope, Outbound)
        assert delivery.envelope.kind == "notification"
        notes.append(delivery.envelope.text)
        await delivery.ack()
    assert notes == [
        "Budget reached: global_daily ($1.00) by all, $2.0000 spent. It resets at midnight UTC.",
        "Budget reached: global_daily ($1.00) by all, $2.0000 spent. It resets at midnight UTC.",
    ]


async def test_the_runtime_refuses_the_model_call_over_a_budget_and_charges_person_and_chat(
    store: SqlStore,
) -> None:
    provider = ScriptedProvider([text_reply("first", usage=Usage(input_tokens=10))])
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry([]),
        store=store,
        cost=lambda model, usage: 0.6,
        clock=Clock(),
        budgets=BudgetGuard(Budgets(per_chat_daily=0.5), store, clock=Clock()),
    )
    context = ChannelContext(
        platform="telegram",
        mode=ModeCatalog().get("no-tools"),
        session_key=CHAT.session_key,
        user_id="7",
        address=CHAT,
    )
    first = await store.create_session(CHAT.session_key)
    ends: list[Any] = []
    for session_id, text in ((first.id, "hi"), ((await store.create_session("x")).id, "again")):
        async for event in runtime.run(session_id, Message.user(text), context):
            if isinstance(event, RunCompleted | RunFailed):
                ends.append(event)

    assert isinstance(ends[0], RunCompleted)
    assert isinstance(ends[1], RunFailed) and ends[1].failure == "budget"
    assert ends[1].message.startswith("This chat has reached its daily spending limit of $0.50")
    assert len(provider.requests) == 1
    [by_user] = await store.costs_by("user")
    [by_chat] = await store.costs_by("chat")
    assert (by_user.key, by_chat.key) == ("telegram:7", "telegram:b:42")


def test_profile_budgets_and_limits_tables_and_max_spend_as_per_session() -> None:
    profile = Profile.parse(
        "p",
        {
            "max_spend_usd": 2.0,
            "budgets": {"per_user_daily": 1.5, "global_daily": 20},
            "limits": {"rate_limit": "5 per 10 seconds", "daily_turns": 0},
        },
        source="profile.toml",
        identity=None,
    )

    budgets = effective_budgets(profile.settings)

    assert (budgets.per_session, budgets.per_user_daily, budgets.global_daily) == (2.0, 1.5, 20)
    assert profile.settings.limits.rate_limit == "5 per 10 seconds"
    with pytest.raises(ConfigError, match=r"^profile.toml: limits.rate_limit: .*'20/minute'"):
        Profile.parse("p", {"limits": {"rate_limit": "lots"}}, source="profile.toml", identity=None)
    with pytest.raises(ConfigError, match=r"budgets.per_chat_daily"):
        Profile.parse(
            "p", {"budgets": {"per_chat_daily": -1}}, source="profile.toml", identity=None
        )


async def test_past_degrade_at_the_scope_closest_to_its_limit_is_named(store: SqlStore) -> None:
    guard = BudgetGuard(
        Budgets(
            per_user_daily=1.0,
            per_chat_daily=2.0,
            global_daily=10.0,
            degrade_at=0.8,
            degrade_model="cheap",
            degrade_steps=2,
        ),
        store,
        clock=Clock(),
    )
    session = await store.create_session(CHAT.session_key)
    spender = Spender(session_id=session.id, user="telegram:7", chat="telegram:b:42")
    await spend(store, session.id, 0.7)
    assert await guard.assess(spender) == Verdict()

    # Another person in the chat: the chat is at 85 %, the person at 70 %.
    await spend(store, session.id, 1.0, user="telegram:8")
    verdict = await guard.assess(spender)
    assert verdict.hit is None and verdict.degrade is not None
    assert (verdict.degrade.name, verdict.degrade.scope) == ("per_chat_daily", "telegram:b:42")
    assert (verdict.degrade.model, verdict.degrade.steps) == ("cheap", 2)
    assert verdict.degrade.sentence() == (
        "Past 85% of this chat's daily spending limit of $2.00, turns run on the cheaper "
        "model cheap until midnight UTC."
    )
    # The person at 90 % now is closer to their limit than the chat (at 90 % too, not more).
    await spend(store, session.id, 0.2, chat="telegram:b:9")
    assert (await guard.assess(spender)).degrade.name == "per_user_daily"  # type: ignore[union-attr]
    # At 100 % the refusal stays, and nothing is cheaper.
    await spend(store, session.id, 0.2)
    verdict = await guard.assess(spender)
    assert verdict.hit is not None and verdict.hit.name == "per_user_daily"
    assert verdict.degrade is None


def test_degrade_settings_go_together_and_share_is_below_one() -> None:
    with pytest.raises(ValueError, match="degrade_at and degrade_model go together"):
        Budgets(per_user_daily=1.0, degrade_at=0.8)
    with pytest.raises(ValueError, match="degrade_steps needs"):
        Budgets(per_user_daily=1.0, degrade_steps=2)
    for share in (0, 1, 1.5):
        with pytest.raises(ValueError, match="degrade_at"):
            Budgets(global_daily=5, degrade_at=share, degrade_model="m")
    with pytest.raises(ValueError, match="degrade_at needs a daily limit"):
        Budgets(per_session=1.0, degrade_at=0.5, degrade_model="m")
    with pytest.raises(ConfigError, match=r"budgets.degrade_at"):
        Profile.parse(
            "p",
            {"budgets": {"global_daily": 5, "degrade_at": 2, "degrade_model": "m"}},
            source="profile.toml",
            identity=None,
        )


async def test_a_degraded_turn_calls_the_cheaper_model_within_degrade_steps(
    store: SqlStore,
) -> None:
    default = ScriptedProvider([text_reply("unused")], name="default")
    cheap = ScriptedProvider(
        [tool_reply(ToolCall(id="c1", name="none", arguments={})), text_reply("never")],
        name="cheap",
    )
    runtime = AgentRuntime(
        provider=default,
        model="big",
        tools=ToolRegistry([]),
        store=store,
        cost=lambda model, usage: 0.0,
        clock=Clock(),
        budgets=BudgetGuard(
            Budgets(per_user_daily=1.0, degrade_at=0.5, degrade_model="small", degrade_steps=1),
            store,
            clock=Clock(),
        ),
        models=ModelChoices(
            default_provider=default,
            default_model="big",
            allowed=(ModelOption(provider="cheap", model="small"),),
            providers={"cheap": cheap},
        ),
    )
    context = ChannelContext(
        platform="telegram",
        mode=ModeCatalog().get("no-tools"),
        session_key=CHAT.session_key,
        user_id="7",
        address=CHAT,
    )
    session = await store.create_session(CHAT.session_key)
    await spend(store, session.id, 0.6)
    events = [e async for e in runtime.run(session.id, Message.user("hi"), context)]

    assert [e.model for e in events if isinstance(e, Degraded)] == ["small"]
    end = events[-1]
    assert isinstance(end, RunFailed) and end.detail == "max_steps=1 reached"
    assert (len(default.requests), len(cheap.requests)) == (0, 1)
    assert [e.degraded for e in await store.cost_entries(session.id)] == [False, True]
