"""Cheaper before refused, through the worker: past `[budgets] degrade_at` of a person's daily
budget the next turn's request to the (fake) OpenAI API names `degrade_model`; the person is
told nothing until they ask `/cost`; at 100 % the refusal stays; the ledger and `/metrics`
count the degraded turn. Providers and choices are built as `bots/app.py` builds them; the
records are in SQLite (embedded) or PostgreSQL (distributed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.providers import build_model_choices, build_provider
from bots.settings import Settings
from core.backends.sql.store import SqlStore, sqlite_url
from core.budgets import BudgetGuard, Budgets
from core.envelopes import Address, Inbound
from core.errors import ConfigError
from core.metrics import Metrics
from core.model_choice import ModelOption, ModelsSettings
from core.profile import Profile, ProfileSettings
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes import FakeOpenAI, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
DEFAULT, CHEAP = "gpt-4.1", "gpt-4o-mini"
BUDGETS = Budgets(per_user_daily=1.0, degrade_at=0.5, degrade_model=CHEAP)


def settings_for(fake_openai: FakeOpenAI) -> Settings:
    return Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )


def profile_with(budgets: Budgets, allowed: list[ModelOption]) -> Profile:
    return Profile(
        name="t",
        settings=ProfileSettings(
            provider="openai",
            model=DEFAULT,
            budgets=budgets,
            models=ModelsSettings(allowed=allowed),
        ),
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def records_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The records of either deployment (a sync fixture: it starts PostgreSQL only when
    asked, which an async fixture cannot do by name)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return sqlite_url(tmp_path / "switchboard.db")


@pytest.fixture
async def records(records_url: str) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(records_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def bot(
    fake_openai: FakeOpenAI, records: SqlStore
) -> AsyncIterator[tuple[Worker, Outbox, Metrics]]:
    store = records
    settings = settings_for(fake_openai)
    profile = profile_with(BUDGETS, [ModelOption(provider="openai", model=CHEAP)])
    provider, resolved = build_provider(settings, profile)
    choices = build_model_choices(settings, profile, provider, resolved)
    runtime = AgentRuntime(
        provider=provider,
        model=resolved.model,
        tools=ToolRegistry([]),
        store=store,
        models=choices,
        # Every call costs 0.3: the second answer passes half of the $1 daily budget.
        cost=lambda model, usage: 0.3,
        budgets=BudgetGuard(BUDGETS, store),
    )
    bus = MemoryBus()
    metrics = Metrics()
    worker = build_worker(bus=bus, store=store, runtime=runtime, metrics=metrics)
    task = asyncio.create_task(worker.run())
    try:
        yield worker, Outbox(bus, "telegram"), metrics
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()


async def say(worker: Worker, outbox: Outbox, text: str) -> str:
    if text.startswith("/"):
        inbound = Inbound(
            address=DM, user_id="u1", text=text, kind="command", command=text[1:], is_direct=True
        )
    else:
        inbound = Inbound(address=DM, user_id="u1", text=text, is_direct=True)
    await hand_in(worker, inbound)
    sent = await outbox.turn_of(inbound)
    return sent[-1].text


async def test_past_degrade_at_the_cheaper_model_answers_until_the_budget_refuses(
    bot: tuple[Worker, Outbox, Metrics], fake_openai: FakeOpenAI, records: SqlStore
) -> None:
    store = records
    worker, outbox, metrics = bot
    fake_openai.script(Text("one"), Text("two"), Text("three"), Text("four"))

    assert await say(worker, outbox, "hello") == "one"
    assert "cheaper model" not in await say(worker, outbox, "/cost")
    assert await say(worker, outbox, "again") == "two"
    # $0.60 of $1.00 spent: past 50 %, and the person is not told in the answer.
    assert await say(worker, outbox, "and again") == "three"
    cost = await say(worker, outbox, "/cost")
    assert (
        f"Past 90% of your daily spending limit of $1.00, turns run on the cheaper model {CHEAP}"
        in cost
    )
    assert await say(worker, outbox, "once more") == "four"
    # $1.20 spent: at 100 % the refusal stays.
    refusal = await say(worker, outbox, "last")
    assert refusal.startswith("You have reached your daily spending limit of $1.00")

    assert [r.json["model"] for r in fake_openai.requests] == [DEFAULT, DEFAULT, CHEAP, CHEAP]
    total = await store.cost_summary()
    assert (total.calls, total.degraded_turns) == (4, 2)
    [cheap] = [row for row in await store.costs_by("model") if row.key == CHEAP]
    assert cheap.degraded_turns == 2
    assert b'switchboard_turns_degraded_total{platform="telegram"} 2.0' in metrics.render()


async def test_degrade_model_must_be_one_the_profile_can_reach(fake_openai: FakeOpenAI) -> None:
    settings = settings_for(fake_openai)
    unknown = profile_with(BUDGETS, [])
    provider, resolved = build_provider(settings, unknown)
    try:
        with pytest.raises(
            ConfigError, match=r"degrade_model 'gpt-4o-mini' is neither the default"
        ):
            build_model_choices(settings, unknown, provider, resolved)
        keyless = profile_with(
            Budgets(per_user_daily=1.0, degrade_at=0.5, degrade_model="claude-haiku-4-5"),
            [ModelOption(provider="anthropic", model="claude-haiku-4-5")],
        )
        with pytest.raises(ConfigError, match=r"degrade_model 'claude-haiku-4-5': .*ANTHROPIC"):
            build_model_choices(settings, keyless, provider, resolved)
    finally:
        await provider.aclose()
