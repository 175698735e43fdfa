"""Memory that consolidates itself (`core/consolidation.py`): the one bounded call, what its
answer does to the person's facts, the ledger, and the two passes that make it (before a
compaction in the runtime, and after a quiet period), over a real SQLite store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.budgets import BudgetGuard, Budgets
from core.compaction import Compactor
from core.consolidation import (
    Consolidator,
    MemorySettings,
    QuietConsolidation,
    latest_stretch,
    parse_answer,
)
from core.errors import ProviderError
from core.events import Compacted, ModelEvent, RunCompleted
from core.facts import MemoryFact
from core.messages import Message, Usage
from core.modes import FULL
from core.providers.base import ModelRequest
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import ToolRegistry

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SCOPE = "default:terminal:local"
WORDS = "lorem ipsum dolor sit amet " * 8
# The consolidation call's usage, told apart in the ledger by its input tokens.
CONSOLIDATION_USAGE = Usage(input_tokens=777, output_tokens=33)


def answer(remember: list[str] | None = None, replace: list[dict[str, str]] | None = None) -> str:
    return json.dumps({"remember": remember or [], "replace": replace or []})


def price(_model: str, usage: Usage) -> float:
    return 0.5 if usage.input_tokens == CONSOLIDATION_USAGE.input_tokens else 0.0


class Responder:
    """A provider telling the three kinds of request apart by their system prompt: the
    summary, the consolidation (answered by `consolidate`) and the turn's own."""

    def __init__(self, consolidate: Callable[[ModelRequest], str | BaseException]) -> None:
        self._consolidate = consolidate
        self.turns: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []
        self.consolidations: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "responder"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.system.startswith("You condense"):
            self.summaries.append(request)
            events = text_reply("SUMMARY")
        elif request.system.startswith("You maintain a long-term memory"):
            self.consolidations.append(request)
            reply = self._consolidate(request)
            if isinstance(reply, BaseException):
                raise reply
            events = text_reply(reply, usage=CONSOLIDATION_USAGE)
        else:
            self.turns.append(request)
            events = text_reply("answer " + WORDS)
        for event in events:
            yield event


def consolidator(store: SqlStore, provider: object, *, max_tokens: int = 300) -> Consolidator:
    return Consolidator(
        profile="default",
        provider=provider,  # type: ignore[arg-type]
        model="test-model",
        facts=store,
        ledger=store,
        redactor=Redactor(),
        cost=price,
        max_tokens=max_tokens,
        clock=lambda: NOW,
    )


def runtime(store: SqlStore, provider: Responder, *, consolidate: bool) -> AgentRuntime:
    return AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        limits=RuntimeLimits(max_tokens=300),
        compactor=Compactor(
            provider, "test-model", keep_last=4, trigger_ratio=0.6, summary_max_tokens=200
        ),
        context_window=2_000,
        clock=lambda: NOW,
        consolidator=consolidator(store, provider) if consolidate else None,
    )


async def talk(
    runtime: AgentRuntime, session_id: str, turns: int, *, direct: bool = True
) -> list[Compacted]:
    context = ChannelContext(
        platform="terminal",
        mode=FULL,
        session_key="terminal:default:it",
        user_id="local",
        is_direct=direct,
    )
    seen: list[Compacted] = []
    for n in range(turns):
        text = f"My dog is called Rex. Question {n} {WORDS}"
        events = [e async for e in runtime.run(session_id, Message.user(text), context)]
        assert isinstance(events[-1], RunCompleted)
        seen.extend(e for e in events if isinstance(e, Compacted))
    return seen


# --- The answer ----------------------------------------------------------------------------


def test_the_answer_must_be_the_schema() -> None:
    assert parse_answer(answer(["Has a dog called Rex"])) is not None
    fenced = parse_answer("```json\n" + answer(["Likes tea"]) + "\n```")
    assert fenced is not None and fenced.remember == ["Likes tea"]
    assert parse_answer("Sure! The person has a dog.") is None
    assert parse_answer('{"remember": ["x"], "notes": "extra key"}') is None
    assert parse_answer('{"remember": "not a list"}') is None
    assert parse_answer(json.dumps({"remember": [f"fact {n}" for n in range(11)]})) is None


# --- Before compaction ---------------------------------------------------------------------


async def test_a_compaction_makes_one_consolidation_call_whose_facts_keep_their_source(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(lambda _r: answer(["Has a dog called Rex"]))
    compacted = await talk(runtime(store, provider, consolidate=True), session_id, 10)

    assert compacted
    # One bounded call per compaction, with the summarized messages in it.
    assert len(provider.consolidations) == len(provider.summaries) == len(compacted)
    first = provider.consolidations[0]
    assert first.max_tokens == 300 and first.tools == []
    assert "User: My dog is called Rex. Question 0" in first.messages[0].text
    # The same fact said again is skipped as a duplicate: stored once.
    (fact,) = await store.list_facts(SCOPE)
    assert (fact.text, fact.source, fact.source_session) == (
        "Has a dog called Rex",
        "consolidated",
        session_id,
    )
    # Each call is charged to the person in the ledger (their budgets read it).
    spent = await store.daily_spend(NOW.date(), user="terminal:local")
    assert spent == pytest.approx(0.5 * len(compacted))


async def test_a_failed_consolidation_call_leaves_the_turn_alone(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(lambda _r: ProviderError("server", "upstream broke"))
    compacted = await talk(runtime(store, provider, consolidate=True), session_id, 10)

    # Every turn completed (`talk` checks), the summary was still used, nothing was kept.
    assert compacted and len(provider.consolidations) == len(compacted)
    assert await store.latest_summary(session_id) is not None
    assert await store.list_facts(SCOPE) == []
    assert await store.daily_spend(NOW.date(), user="terminal:local") == 0


async def test_disabled_consolidation_makes_no_call(store: SqlStore, session_id: str) -> None:
    provider = Responder(lambda _r: answer(["Has a dog called Rex"]))
    compacted = await talk(runtime(store, provider, consolidate=False), session_id, 10)

    assert compacted and provider.summaries
    assert provider.consolidations == []
    assert await store.list_facts(SCOPE) == []
    assert (
        MemorySettings.model_validate({"consolidate": False, "consolidate_after": "30m"}).quiet_pass
        is None
    )


async def test_a_group_conversation_is_not_consolidated(store: SqlStore, session_id: str) -> None:
    provider = Responder(lambda _r: answer(["Has a dog called Rex"]))
    compacted = await talk(runtime(store, provider, consolidate=True), session_id, 10, direct=False)

    assert compacted
    assert provider.consolidations == []


# --- What the answer does ------------------------------------------------------------------


async def test_a_credential_looking_fact_is_refused(store: SqlStore, session_id: str) -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    provider = ScriptedProvider(
        [text_reply(answer([f"Their OpenAI key is {key}", "Prefers short answers"]))]
    )

    done = await consolidator(store, provider).consolidate(
        session_id, [Message.user("Keep my key safe please")], platform="terminal", user_id="local"
    )

    assert done.refused == ["credential"]
    assert [f.text for f in await store.list_facts(SCOPE)] == ["Prefers short answers"]


async def test_a_contradicted_fact_is_replaced(store: SqlStore, session_id: str) -> None:
    old = MemoryFact(id="f1", scope=SCOPE, text="Lives in Lyon", created_at=NOW)
    await store.remember_fact(old)
    provider = ScriptedProvider(
        [text_reply(answer(replace=[{"id": "f1", "text": "Lives in Paris since 2026"}]))]
    )

    done = await consolidator(store, provider).consolidate(
        session_id,
        [Message.user("We moved to Paris this year!")],
        platform="terminal",
        user_id="local",
    )

    assert done.replaced == ["f1"]
    (fact,) = await store.list_facts(SCOPE)
    assert (fact.text, fact.source, fact.source_session) == (
        "Lives in Paris since 2026",
        "consolidated",
        session_id,
    )
    # The model was shown the remembered fact with its id, to name it.
    assert "[f1] Lives in Lyon" in provider.requests[0].messages[0].text


async def test_a_replacement_of_a_fact_it_was_not_shown_changes_nothing(
    store: SqlStore,
    session_id: str,
) -> None:
    other = MemoryFact(id="b1", scope="default:terminal:bob", text="Lives in Rome", created_at=NOW)
    await store.remember_fact(other)
    provider = ScriptedProvider(
        [text_reply(answer(replace=[{"id": "b1", "text": "Lives in Oslo"}]))]
    )

    done = await consolidator(store, provider).consolidate(
        session_id, [Message.user("hello")], platform="terminal", user_id="local"
    )

    assert done.replaced == []
    assert await store.list_facts("default:terminal:bob") == [other]
    assert await store.list_facts(SCOPE) == []


async def test_an_answer_that_is_not_the_schema_changes_nothing_but_is_charged(
    store: SqlStore,
    session_id: str,
) -> None:
    provider = ScriptedProvider([text_reply("The person has a dog.", usage=CONSOLIDATION_USAGE)])

    done = await consolidator(store, provider).consolidate(
        session_id, [Message.user("My dog is Rex")], platform="terminal", user_id="local"
    )

    assert not done.answered
    assert await store.list_facts(SCOPE) == []
    assert (await store.cost_summary(session_id)).calls == 1


async def test_a_person_past_their_budget_is_not_consolidated(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([text_reply(answer(["Has a dog"]), usage=CONSOLIDATION_USAGE)])
    spending = consolidator(store, provider)
    spending.budgets = BudgetGuard(Budgets(per_user_daily=0.4), store, clock=lambda: NOW)
    said = [Message.user("My dog is Rex")]

    # The first call is within the budget and spends 0.5 of it; the second is refused.
    await spending.consolidate(session_id, said, platform="terminal", user_id="local")
    skipped = await spending.consolidate(session_id, said, platform="terminal", user_id="local")

    assert len(provider.requests) == 1
    assert not skipped.answered
    assert (await store.cost_summary(session_id)).calls == 1


# --- After a quiet period ------------------------------------------------------------------


def test_the_latest_stretch_starts_after_the_last_quiet_gap() -> None:
    at = [
        NOW,
        NOW + timedelta(minutes=5),
        NOW + timedelta(hours=2),
        NOW + timedelta(hours=2, minutes=1),
    ]
    messages = [
        Message.user(f"m{n}").model_copy(update={"created_at": t}) for n, t in enumerate(at)
    ]

    assert [m.text for m in latest_stretch(messages, timedelta(minutes=30))] == ["m2", "m3"]
    assert len(latest_stretch(messages, timedelta(hours=3))) == 4


async def test_the_quiet_pass_runs_once_per_quiet_period(tmp_path: object) -> None:
    clock = [NOW]
    store = await SqlStore.open(sqlite_url(tmp_path / "quiet.db"), clock=lambda: clock[0])  # type: ignore[operator]
    try:
        session = await store.current_session("terminal:default:local")
        provider = ScriptedProvider(
            [text_reply(answer(["Has a dog called Rex"])), text_reply(answer(["Likes tea"]))]
        )
        quiet = QuietConsolidation(
            store=store,
            consolidator=consolidator(store, provider),
            after=timedelta(minutes=30),
            clock=lambda: clock[0],
        )

        async def say(text: str) -> None:
            await store.append_message(
                session.id, Message.user(text).model_copy(update={"author": "terminal:local"})
            )
            await store.append_message(session.id, Message.assistant("noted"))

        await say("My dog is called Rex")
        clock[0] = NOW + timedelta(minutes=29)
        assert await quiet.tick_once() == 0  # not quiet long enough
        clock[0] = NOW + timedelta(minutes=31)
        assert await quiet.tick_once() == 1
        clock[0] = NOW + timedelta(minutes=45)
        assert await quiet.tick_once() == 0  # that quiet period is done
        assert len(provider.requests) == 1

        clock[0] = NOW + timedelta(hours=3)
        await say("I drink tea every morning")
        clock[0] = NOW + timedelta(hours=4)
        assert await quiet.tick_once() == 1
        # Only what was said since the previous quiet period.
        second = provider.requests[1].messages[0].text
        assert "tea every morning" in second and "Rex" not in second.split("The conversation:")[1]
        facts = await store.list_facts(SCOPE)
        assert {f.text for f in facts} == {"Has a dog called Rex", "Likes tea"}
        assert {(f.source, f.source_session) for f in facts} == {("consolidated", session.id)}
    finally:
        await store.close()


async def test_the_quiet_pass_leaves_schedules_and_groups_alone(tmp_path: object) -> None:
    clock = [NOW]
    store = await SqlStore.open(sqlite_url(tmp_path / "quiet.db"), clock=lambda: clock[0])  # type: ignore[operator]
    try:
        group = await store.current_session("telegram:bot:-100")
        for author in ("telegram:1", "telegram:2"):
            await store.append_message(
                group.id, Message.user("hi").model_copy(update={"author": author})
            )
        scheduled = await store.current_session("scheduled:abc")
        await store.append_message(scheduled.id, Message.user("run the report"))
        provider = ScriptedProvider([])
        quiet = QuietConsolidation(
            store=store,
            consolidator=consolidator(store, provider),
            after=timedelta(minutes=30),
            clock=lambda: clock[0],
        )
        clock[0] = NOW + timedelta(hours=1)

        assert await quiet.tick_once() == 0
        assert provider.requests == []
    finally:
        await store.close()


def test_memory_settings_read_the_profile_table() -> None:
    settings = MemorySettings.model_validate({"consolidate_after": "30m"})
    assert settings.consolidate and settings.quiet_pass == timedelta(minutes=30)
    assert MemorySettings().quiet_pass is None
    with pytest.raises(ValueError, match="consolidate_after"):
        MemorySettings.model_validate({"consolidate_after": "soon"})
