"""Compaction: `Compactor` on its own, and the runtime compacting a long conversation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from core.backends.sql.store import SqlStore
from core.compaction import Compactor, summary_messages
from core.envelopes import Address
from core.errors import ProviderError
from core.events import AgentEvent, Compacted, ModelEvent, RunCompleted, RunFailed
from core.messages import Message
from core.model_choice import ModelChoices, ModelOption
from core.modes import FULL
from core.providers.base import ModelRequest
from core.providers.scripted import text_reply
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.store.base import CompactionSummary
from core.tools import ToolRegistry

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WORDS = "lorem ipsum dolor sit amet " * 8


class Responder:
    """A provider answering each request with a function of it; summary requests (told apart
    by their system prompt) go to `summarize`, the others to `answer`."""

    def __init__(
        self,
        answer: Callable[[ModelRequest], str | BaseException] = lambda _r: "ok",
        summarize: Callable[[ModelRequest], str | BaseException] = lambda _r: "SUMMARY",
    ) -> None:
        self._answer = answer
        self._summarize = summarize
        self.requests: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "responder"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        is_summary = request.system.startswith("You condense")
        (self.summaries if is_summary else self.requests).append(request)
        reply = (self._summarize if is_summary else self._answer)(request)
        if isinstance(reply, BaseException):
            raise reply
        for event in text_reply(reply):
            yield event


def make_runtime(
    store: SqlStore,
    provider: Responder,
    *,
    window: int = 2_000,
    keep_last: int = 4,
    compact: bool = True,
) -> AgentRuntime:
    compactor = (
        Compactor(
            provider,
            "test-model",
            keep_last=keep_last,
            trigger_ratio=0.6,
            summary_max_tokens=200,
            clock=lambda: NOW,
        )
        if compact
        else None
    )
    return AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        limits=RuntimeLimits(max_tokens=300),
        compactor=compactor,
        context_window=window,
    )


async def run_turn(runtime: AgentRuntime, session_id: str, text: str) -> list[AgentEvent]:
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    return [e async for e in runtime.run(session_id, Message.user(text), context)]


def compactions(events: list[AgentEvent]) -> list[Compacted]:
    return [e for e in events if isinstance(e, Compacted)]


# --- Compactor on its own ------------------------------------------------------------------


def test_split_keeps_the_last_messages_and_cuts_before_a_user_message() -> None:
    compactor = Compactor(Responder(), "m", keep_last=3)
    history = [
        Message.user("q1"),
        Message.assistant("a1"),
        Message.user("q2"),
        Message.assistant("a2"),
        Message.user("q3"),
        Message.assistant("a3"),
    ]

    assert compactor.split(history) == 2
    assert compactor.split(history[:3]) == 0
    assert Compactor(Responder(), "m", keep_last=1).split(history) == 4
    assert Compactor(Responder(), "m", keep_last=50).split(history) == 0


def test_the_trigger_is_a_share_of_the_budget() -> None:
    compactor = Compactor(Responder(), "m", trigger_ratio=0.8)

    assert not compactor.due(800, 1_000)
    assert compactor.due(801, 1_000)
    with pytest.raises(ValueError, match="trigger_ratio"):
        Compactor(Responder(), "m", trigger_ratio=0)


def test_the_summary_travels_as_a_user_and_assistant_pair() -> None:
    pair = summary_messages(CompactionSummary(up_to_seq=4, text="They like tea.", created_at=NOW))

    assert [m.role for m in pair] == ["user", "assistant"]
    assert "They like tea." in pair[0].text


async def test_snippets_stand_in_when_the_summary_call_fails(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(summarize=lambda _r: ProviderError("overloaded", "busy"))
    compactor = Compactor(provider, "m", keep_last=2, snippet_chars=20, clock=lambda: NOW)
    history = [
        await store.append_message(session_id, m)
        for m in (
            Message.user("Please remember my cat is called Miso and likes tuna"),
            Message.assistant("Noted: Miso likes tuna."),
            Message.user("now something else"),
            Message.assistant("sure"),
        )
    ]

    done = await compactor.compact(store, session_id, history, previous=None, window_tokens=4_000)

    assert done is not None
    assert not done.by_model
    assert done.summarized_messages == 2
    assert done.summary.up_to_seq == 2
    assert "User: Please remember my" in done.summary.text
    assert "Assistant: Noted: Miso" in done.summary.text
    assert "tuna" not in done.summary.text.split("\n")[0]
    assert await store.latest_summary(session_id) == done.summary


async def test_the_previous_summary_is_folded_into_the_next(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(summarize=lambda r: "folded: " + r.messages[0].text[:60])
    compactor = Compactor(provider, "m", keep_last=1, clock=lambda: NOW)
    history = [
        await store.append_message(session_id, m)
        for m in (Message.user("q3"), Message.assistant("a3"), Message.user("q4"))
    ]
    previous = CompactionSummary(up_to_seq=1, text="EARLIER-FACTS", created_at=NOW)

    done = await compactor.compact(
        store, session_id, history, previous=previous, window_tokens=4_000
    )

    assert done is not None and done.by_model
    [request] = provider.summaries
    assert "EARLIER-FACTS" in request.messages[0].text
    assert "q3" in request.messages[0].text
    assert request.max_tokens == compactor.summary_max_tokens
    assert done.summary.text.startswith("folded: ")


# --- the runtime compacting ----------------------------------------------------------------


async def test_a_growing_conversation_is_compacted_and_the_summary_used(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(answer=lambda _r: "answer " + WORDS)
    runtime = make_runtime(store, provider, keep_last=4)

    seen: list[Compacted] = []
    for n in range(12):
        events = await run_turn(runtime, session_id, f"question {n} {WORDS}")
        assert isinstance(events[-1], RunCompleted)
        seen.extend(compactions(events))

    assert seen
    assert all(c.summarized_messages >= 2 and c.summary_tokens > 0 for c in seen)
    summary = await store.latest_summary(session_id)
    assert summary is not None and summary.text == "SUMMARY"
    last = provider.requests[-1]
    assert last.messages[:2] == summary_messages(summary)
    # Everything after the marker is sent: at least the last K messages, whole turns.
    after = await store.list_messages(session_id, after_seq=summary.up_to_seq)
    sent = last.messages[2:]
    assert [m.text for m in sent] == [m.text for m in after[: len(sent)]]
    assert sent[0].role == "user"
    assert len(sent) >= 4 - 1  # the answer being written is not in the request yet
    assert len(await store.list_messages(session_id)) == 24


async def test_no_compaction_below_the_trigger(store: SqlStore, session_id: str) -> None:
    provider = Responder()
    runtime = make_runtime(store, provider, window=100_000)

    for n in range(5):
        assert not compactions(await run_turn(runtime, session_id, f"q{n}"))

    assert provider.summaries == []
    assert await store.latest_summary(session_id) is None


async def test_a_context_overflow_compacts_and_retries_once(
    store: SqlStore, session_id: str
) -> None:
    overflow = iter([False, False, False, True])
    provider = Responder(
        answer=lambda _r: (
            ProviderError("context_overflow", "prompt is too long")
            if next(overflow, False)
            else "fine"
        )
    )
    runtime = make_runtime(store, provider, window=100_000, keep_last=2)
    for n in (1, 2, 3):
        await run_turn(runtime, session_id, f"question {n}")

    events = await run_turn(runtime, session_id, "question 4")

    assert isinstance(events[-1], RunCompleted)
    [compacted] = compactions(events)
    # Seven messages, the last two kept: the cut falls before "question 3".
    assert compacted.summarized_messages == 4
    assert len(provider.summaries) == 1
    failed, retried = provider.requests[3:]
    assert len(failed.messages) == 7
    assert [m.text for m in retried.messages[2:]] == ["question 3", "fine", "question 4"]
    assert retried.messages[0].text.endswith("SUMMARY")
    assert len(await store.list_messages(session_id)) == 8


async def test_a_second_overflow_fails_the_turn_after_one_retry(
    store: SqlStore, session_id: str
) -> None:
    calls = 0

    def answer(_r: ModelRequest) -> str | BaseException:
        nonlocal calls
        calls += 1
        return ProviderError("context_overflow", "still too long") if calls > 2 else "fine"

    provider = Responder(answer=answer)
    runtime = make_runtime(store, provider, window=100_000, keep_last=1)
    for n in (1, 2):
        await run_turn(runtime, session_id, f"question {n}")

    events = await run_turn(runtime, session_id, "question 3")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "provider"
    assert "too long" in failed.message
    assert calls == 4  # two turns, then the request and its one retry


async def test_a_message_too_big_for_the_window_is_a_budget_failure(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder()
    runtime = make_runtime(store, provider, window=2_000)

    events = await run_turn(runtime, session_id, "x" * 20_000)

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "budget"
    assert "context window" in failed.message
    assert provider.requests == []


# --- what the summarizing call costs, and on which model it runs ----------------------------


def priced_runtime(
    store: SqlStore, provider: Responder, models: ModelChoices | None = None
) -> AgentRuntime:
    """A runtime that compacts soon, its compactor on its own model; each call costs $0.01,
    a summary $0.50."""
    return AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        limits=RuntimeLimits(max_tokens=300),
        compactor=Compactor(
            provider, "summary-model", keep_last=4, trigger_ratio=0.6, summary_max_tokens=200
        ),
        context_window=2_000,
        cost=lambda model, _usage: 0.5 if model == "summary-model" else 0.01,
        models=models,
    )


async def person_turn(
    runtime: AgentRuntime, session_id: str, text: str, model: str | None = None
) -> list[AgentEvent]:
    context = ChannelContext(
        platform="terminal",
        mode=FULL,
        session_key="terminal:default:it",
        user_id="alice",
        address=Address(platform="terminal", chat="it"),
    )
    return [e async for e in runtime.run(session_id, Message.user(text), context, model=model)]


async def test_the_summarizing_call_is_charged_to_the_session_person_and_chat(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(answer=lambda _r: "answer " + WORDS)
    runtime = priced_runtime(store, provider)

    outcomes: list[RunCompleted] = []
    for n in range(12):
        events = await person_turn(runtime, session_id, f"question {n} {WORDS}")
        assert isinstance(events[-1], RunCompleted)
        if compactions(events):
            outcomes.append(events[-1])

    assert provider.summaries and outcomes
    assert {r.model for r in provider.summaries} == {"summary-model"}
    entries = await store.cost_entries(session_id)
    summaries = [e for e in entries if e.model == "summary-model"]
    assert len(summaries) == len(provider.summaries)
    assert len(entries) == len(provider.requests) + len(provider.summaries)
    assert {(e.user, e.chat, e.cost_usd) for e in summaries} == {
        ("terminal:alice", "terminal:default:it", 0.5)
    }
    # The turn that compacted counts the summary in its cost.
    assert all(o.cost_usd == pytest.approx(0.51) for o in outcomes)
    assert {e.run_id for e in summaries} <= {o.run_id for o in outcomes}


async def test_a_chat_that_chose_a_model_is_summarized_on_it(
    store: SqlStore, session_id: str
) -> None:
    provider = Responder(answer=lambda _r: "answer " + WORDS)
    choices = ModelChoices(
        default_provider=provider,
        default_model="test-model",
        allowed=(ModelOption(provider="responder", model="chosen-model"),),
        providers={"responder": provider},
    )
    runtime = priced_runtime(store, provider, choices)

    for n in range(12):
        text = f"question {n} {WORDS}"
        events = await person_turn(runtime, session_id, text, model="chosen-model")
        assert isinstance(events[-1], RunCompleted)

    assert provider.summaries
    assert {r.model for r in provider.summaries} == {"chosen-model"}
    entries = await store.cost_entries(session_id)
    assert {e.model for e in entries} == {"chosen-model"}
    assert len(entries) == len(provider.requests) + len(provider.summaries)
