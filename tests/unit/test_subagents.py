"""Sub-agents: `delegate` runs a bounded child turn, driven by a scripted provider against the
real SQLite store (one provider plays both the parent and its children; a step that depends on
who asks reads the request's first message, which is the child's task)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import pytest
from pydantic import BaseModel

from core.arrivals import Arrival
from core.backends.sql.store import SqlStore
from core.bus.names import EVENTS
from core.confirm import Confirmations
from core.envelopes import Address, EventEnvelope
from core.errors import ProviderError
from core.events import (
    AgentEvent,
    Cancelled,
    ChildEvent,
    ModelEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    ToolFinished,
    ToolRequested,
)
from core.images import GeneratedImage
from core.messages import Message, ToolCall, Usage
from core.model_choice import ModelChoices, ModelOption
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT, CapabilityMode
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.store.people import Person
from core.subagents import DELEGATE, SubagentOptions, Subagents
from core.tools import (
    GENERATE_IMAGE,
    FileDrop,
    SafetyTier,
    Tool,
    ToolContext,
    ToolRegistry,
    generate_image_tool,
)
from core.tools.ask_user import ASK_USER, ask_user_tool
from core.turns.lifecycle import Lifecycle
from tests.backends.memory_bus import MemoryBus

PATIENCE = 5.0

# A mode offering only the test tool and `delegate`: narrower than `full`.
HELPER = CapabilityMode(
    name="helper", tools=frozenset({"lookup", DELEGATE}), prompt_rules="Helper rules."
)


class LookupArgs(BaseModel):
    key: str = ""


async def lookup(args: LookupArgs, _ctx: ToolContext) -> str:
    return f"value of {args.key}"


LOOKUP = Tool(
    name="lookup",
    description="Look a key up.",
    args=LookupArgs,
    tier=SafetyTier.READ_ONLY,
    run=lookup,
)


def delegate(call_id: str, task: str, mode: str | None = None) -> ToolCall:
    arguments: dict[str, Any] = {"task": task}
    if mode is not None:
        arguments["mode"] = mode
    return ToolCall(id=call_id, name=DELEGATE, arguments=arguments)


def asked(request: ModelRequest) -> str:
    """The first user text of a request: a child's task, or the person's message."""
    return next(m.text for m in request.messages if m.role == "user")


def channel(mode: CapabilityMode = FULL) -> ChannelContext:
    return ChannelContext(
        platform="terminal",
        mode=mode,
        session_key="terminal:default:it",
        user_id="alice",
        address=Address(platform="terminal", chat="it"),
    )


def make(
    store: SqlStore,
    script: Iterable[ScriptStep],
    options: SubagentOptions | None = None,
    **runtime_options: Any,
) -> tuple[AgentRuntime, ScriptedProvider]:
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([LOOKUP]),
        store=store,
        **runtime_options,
    )
    runtime.tools.add(Subagents(runtime, options).tool())
    return runtime, provider


async def events_of(
    runtime: AgentRuntime,
    session_id: str,
    text: str,
    mode: CapabilityMode = FULL,
    cancel: asyncio.Event | None = None,
) -> list[AgentEvent]:
    async with asyncio.timeout(PATIENCE):
        return [
            e
            async for e in runtime.run(session_id, Message.user(text), channel(mode), cancel=cancel)
        ]


def children(events: list[AgentEvent]) -> list[ChildEvent]:
    return [e for e in events if isinstance(e, ChildEvent)]


def result_of(events: list[AgentEvent], call_id: str) -> ToolFinished:
    return next(e for e in events if isinstance(e, ToolFinished) and e.call_id == call_id)


async def test_the_parent_reads_the_childs_answer_and_its_history_stays_its_own(
    store: SqlStore, session_id: str
) -> None:
    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "Find the capital of France.")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "france"})),
        text_reply("Paris."),
        text_reply("The sub-agent says: Paris."),
    ]
    runtime, provider = make(store, script)

    events = await events_of(runtime, session_id, "What is the capital of France?")

    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "The sub-agent says: Paris."
    assert result_of(events, "d1").output == "Paris."
    assert not result_of(events, "d1").is_error
    # The child's request: its task alone, its own prompt hint, no `delegate` (depth 1).
    child_request = provider.requests[1]
    assert [m.text for m in child_request.messages] == ["Find the capital of France."]
    assert "sub-agent" in child_request.system
    assert [t.name for t in child_request.tools] == ["lookup"]
    # The parent's history holds the call and the answer, none of the child's steps.
    parent = await store.list_messages(session_id)
    assert [(m.role, m.text) for m in parent if m.role != "assistant"] == [
        ("user", "What is the capital of France?"),
        ("tool", "Paris."),
    ]
    child = await store.list_messages(f"{session_id}/sub/d1")
    assert [m.role for m in child] == ["user", "assistant", "tool", "assistant"]


async def test_the_childs_events_are_nested_with_the_parents_run(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "child task")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "k"})),
        text_reply("child answer"),
        text_reply("done"),
    ]
    runtime, _ = make(store, script)

    events = await events_of(runtime, session_id, "go")

    parent_run = events[0]
    assert isinstance(parent_run, RunStarted)
    nested = children(events)
    kinds = [type(e.event) for e in nested]
    assert kinds[0] is RunStarted
    assert kinds[-1] is RunCompleted
    assert ToolRequested in kinds and ToolFinished in kinds
    child_run = nested[0].event
    assert isinstance(child_run, RunStarted)
    assert child_run.session_id == f"{session_id}/sub/d1"
    assert {(e.parent_run_id, e.call_id, e.run_id, e.depth) for e in nested} == {
        (parent_run.run_id, "d1", child_run.run_id, 1)
    }
    # The child's tool events come between the parent's request and result of `delegate`.
    requested = next(i for i, e in enumerate(events) if isinstance(e, ToolRequested))
    finished = events.index(result_of(events, "d1"))
    assert all(requested < events.index(e) < finished for e in nested)


async def test_a_mode_wider_than_the_parents_is_clamped_and_the_result_says_so(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "wide task", mode="full")),
        text_reply("wide answer"),
        text_reply("done"),
    ]
    runtime, provider = make(store, script)

    events = await events_of(runtime, session_id, "go", mode=HELPER)

    output = result_of(events, "d1").output
    assert "'full' is wider than this chat's ('helper')" in output
    assert output.endswith("wide answer")
    child_request = provider.requests[1]
    assert [t.name for t in child_request.tools] == ["lookup"]
    assert "Helper rules." in child_request.system


async def test_a_narrower_mode_is_kept(store: SqlStore, session_id: str) -> None:
    script = [
        tool_reply(delegate("d1", "narrow task", mode="no-tools")),
        text_reply("narrow answer"),
        text_reply("done"),
    ]
    runtime, provider = make(store, script)

    events = await events_of(runtime, session_id, "go", mode=HELPER)

    assert result_of(events, "d1").output == "narrow answer"
    assert provider.requests[1].tools == []
    assert NO_TOOLS.prompt_rules in provider.requests[1].system


def test_modes_are_ordered_by_the_tools_they_allow() -> None:
    assert NO_TOOLS.within(SAFE_CHAT)
    assert SAFE_CHAT.within(DISCORD) and DISCORD.within(SAFE_CHAT)
    assert SAFE_CHAT.within(FULL)
    assert HELPER.within(FULL)
    assert not FULL.within(SAFE_CHAT)
    assert not SAFE_CHAT.within(NO_TOOLS)
    assert not SAFE_CHAT.within(HELPER)
    assert not FULL.model_copy(update={"confirm_privileged": False}).within(FULL)
    withheld = HELPER.withholding([SafetyTier.SIDE_EFFECTING], "Not for you.")
    # Whatever runs on the person's behalf keeps what is withheld from them.
    assert NO_TOOLS.narrowed_to(withheld).withheld == withheld.withheld
    assert NO_TOOLS.narrowed_to(withheld).name == "no-tools"
    assert FULL.narrowed_to(withheld) == withheld


async def test_an_unknown_mode_is_an_error_the_model_reads(
    store: SqlStore, session_id: str
) -> None:
    script = [tool_reply(delegate("d1", "task", mode="godmode")), text_reply("done")]
    runtime, _ = make(store, script)

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error
    assert "unknown capability mode 'godmode'" in result.output


async def test_the_child_stops_at_its_step_limit(store: SqlStore, session_id: str) -> None:
    script = [
        tool_reply(delegate("d1", "endless task")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "a"})),
        tool_reply(ToolCall(id="l2", name="lookup", arguments={"key": "b"})),
        text_reply("the parent goes on"),
    ]
    runtime, provider = make(store, script, SubagentOptions(max_steps=2))

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error
    assert "within 2 steps" in result.output
    assert isinstance(events[-1], RunCompleted)
    assert len(provider.requests) == 4  # two child calls, no third


async def test_the_child_stops_at_its_cost_limit_and_its_calls_are_the_persons(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "costly task")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "a"})),
        tool_reply(ToolCall(id="l2", name="lookup", arguments={"key": "b"})),
        text_reply("the parent goes on"),
    ]
    runtime, provider = make(
        store,
        script,
        SubagentOptions(max_cost_usd=0.015),
        cost=lambda _model, _usage: 0.01,
    )

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error
    assert "spending limit of $0.015" in result.output
    assert len(provider.requests) == 4  # two child calls ($0.02 > $0.015), no third
    # The child's calls are charged to the parent's session, as the parent's person's.
    assert await store.cost_entries(f"{session_id}/sub/d1") == []
    entries = await store.cost_entries(session_id)
    assert len(entries) == 4
    assert {(e.user, e.chat) for e in entries} == {("terminal:alice", "terminal:default:it")}
    day = entries[0].at.date()
    # The person's daily spending (what `per_user_daily` reads) counts the child's calls.
    assert await store.daily_spend(day, user="terminal:alice") == pytest.approx(0.04)


async def test_two_delegates_of_one_answer_run_at_once(store: SqlStore, session_id: str) -> None:
    started = {"one": asyncio.Event(), "two": asyncio.Event()}

    async def child(request: ModelRequest) -> list[ModelEvent]:
        mine = asked(request)
        started[mine].set()
        other = "two" if mine == "one" else "one"
        # Each child answers only once the other has started: both run at the same time.
        await started[other].wait()
        return text_reply(f"answer {mine}")

    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "one"), delegate("d2", "two")),
        child,
        child,
        text_reply("both done"),
    ]
    runtime, _ = make(store, script)

    events = await events_of(runtime, session_id, "go")

    assert isinstance(events[-1], RunCompleted)
    assert result_of(events, "d1").output == "answer one"
    assert result_of(events, "d2").output == "answer two"


async def test_max_parallel_makes_further_delegates_wait(store: SqlStore, session_id: str) -> None:
    seen: list[int] = []
    subagents: Subagents

    async def child(request: ModelRequest) -> list[ModelEvent]:
        # Both calls reach their slot before either child's first model call (the child's
        # turn opens in the store first), so without the bound this would see 2.
        seen.append(subagents.running)
        return text_reply(f"answer {asked(request)}")

    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "one"), delegate("d2", "two")),
        child,
        child,
        text_reply("both done"),
    ]
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry([LOOKUP]), store=store
    )
    subagents = Subagents(runtime, SubagentOptions(max_parallel=1))
    runtime.tools.add(subagents.tool())

    events = await events_of(runtime, session_id, "go")

    assert isinstance(events[-1], RunCompleted)
    assert seen == [1, 1]
    assert result_of(events, "d2").output == "answer two"
    assert subagents.running == 0


async def test_cancelling_the_parent_cancels_the_child(store: SqlStore, session_id: str) -> None:
    child_asked, never_set, child_cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()
    cancel = asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        child_asked.set()
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            child_cancelled.set()
            raise
        return []

    script: list[ScriptStep] = [tool_reply(delegate("d1", "slow task")), thinks]
    runtime, _ = make(store, script, cost=lambda _model, _usage: 0.01)

    async def cancel_once_the_child_thinks() -> None:
        await child_asked.wait()
        cancel.set()

    canceller = asyncio.create_task(cancel_once_the_child_thinks())
    events = await events_of(runtime, session_id, "go", cancel=cancel)
    await canceller

    assert isinstance(events[-1], Cancelled)
    assert child_cancelled.is_set()
    nested = children(events)
    assert isinstance(nested[-1].event, Cancelled)
    # The child's cut call is charged (estimated), as a cancelled turn's is: to the parent's
    # session.
    charged = [e.run_id for e in await store.cost_entries(session_id)]
    assert charged.count(nested[-1].run_id) == 1
    parent = await store.list_messages(session_id)
    assert parent[-1].role == "tool"
    assert parent[-1].is_error


async def test_a_child_failing_tells_the_parent_why(store: SqlStore, session_id: str) -> None:
    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "task")),
        ProviderError("auth", "bad key", provider="scripted"),
        text_reply("the parent goes on"),
    ]
    runtime, _ = make(store, script)

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error
    assert result.output.startswith("The sub-agent stopped without an answer:")
    assert isinstance(events[-1], RunCompleted)
    assert isinstance(children(events)[-1].event, RunFailed)


async def test_the_lifecycle_publishes_a_childs_events_with_its_parent() -> None:
    bus = MemoryBus()
    events = await bus.subscribe(EVENTS)
    lifecycle = Lifecycle(bus, Redactor())
    context = channel()
    started = RunStarted(run_id="child-run", session_id="s/sub/d1", provider="p", model="m")
    nested = ChildEvent(
        parent_run_id="parent-run",
        call_id="d1",
        run_id="child-run",
        session_id="s/sub/d1",
        event=started,
    )
    await lifecycle.publish(nested, "s", "parent-run", context)
    await lifecycle.publish(
        ChildEvent(
            parent_run_id="parent-run",
            call_id="d1",
            run_id="child-run",
            session_id="s/sub/d1",
            event=RunCompleted(run_id="child-run", text="ok", usage=Usage()),
        ),
        "s",
        "parent-run",
        context,
    )
    await lifecycle.sent()
    got: list[EventEnvelope] = []
    async with asyncio.timeout(PATIENCE):
        async for envelope in events:
            assert isinstance(envelope, EventEnvelope)
            got.append(envelope)
            if len(got) == 2:
                break
    assert [(e.name, e.run_id, e.session_id) for e in got] == [
        ("agent.run.start", "child-run", "s/sub/d1"),
        ("agent.run.complete", "child-run", "s/sub/d1"),
    ]
    assert all(e.data["parent_run_id"] == "parent-run" and e.data["depth"] == 1 for e in got)
    assert all(e.session_key == "terminal:default:it" for e in got)
    await events.aclose()
    await bus.close()


async def test_a_child_cut_off_by_a_crash_is_abandoned_and_the_resumed_parent_told(
    store: SqlStore, session_id: str
) -> None:
    child_asked, never_set = asyncio.Event(), asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        child_asked.set()
        await never_set.wait()
        return []

    source = "terminal:it:7"
    crashed, _ = make(store, [tool_reply(delegate("d1", "slow task")), thinks])
    stream = crashed.run(session_id, Message.user("go", source=source), channel())
    assert isinstance(stream, AsyncGenerator)
    async with contextlib.aclosing(stream) as crashing:
        async for _event in crashing:
            if child_asked.is_set():
                break  # the worker dies while the child thinks

    resumed, provider = make(store, [text_reply("That was cut off; shall I try again?")])
    events = await events_of_message(resumed, session_id, Message.user("go", source=source))

    assert isinstance(events[-1], RunCompleted)
    # The parent's model reads that the call was interrupted; the child is not run again.
    assert len(provider.requests) == 1
    result = provider.requests[0].messages[-1]
    assert result.role == "tool" and result.is_error and "interrupted" in result.text
    assert children(events) == []
    child = await store.list_messages(f"{session_id}/sub/d1")
    assert [m.role for m in child] == ["user"]


async def events_of_message(
    runtime: AgentRuntime, session_id: str, message: Message
) -> list[AgentEvent]:
    async with asyncio.timeout(PATIENCE):
        return [e async for e in runtime.run(session_id, message, channel())]


async def test_erasing_the_person_erases_their_childs_session(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "my private errand")),
        text_reply("errand done"),
        text_reply("done"),
    ]
    runtime, _ = make(store, script)
    await events_of(runtime, session_id, "go")
    child_session = f"{session_id}/sub/d1"
    assert await store.list_messages(child_session)

    erased = await store.erase_person(Person(platform="terminal", user_id="alice"))

    assert erased.sessions_deleted >= 1
    assert await store.list_messages(child_session) == []


async def test_a_child_past_its_time_is_stopped_and_the_parent_told(
    store: SqlStore, session_id: str
) -> None:
    # A real wait, kept short: the child's own limit (0.05 s) ends it, not the runtime's
    # tool_timeout (0.01 s, shorter), which `delegate` is not held to.
    never_set = asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[ModelEvent]:
        await never_set.wait()
        return []

    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "slow task")),
        thinks,
        text_reply("the parent goes on"),
    ]
    runtime, _ = make(
        store,
        script,
        SubagentOptions(timeout_seconds=0.05),
        limits=RuntimeLimits(tool_timeout=0.01),
        cost=lambda _model, _usage: 0.01,
    )

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error
    assert result.output == "The sub-agent ran out of time (0.05s) and was stopped."
    assert isinstance(events[-1], RunCompleted)
    nested = children(events)
    assert isinstance(nested[-1].event, Cancelled)
    charged = [e.run_id for e in await store.cost_entries(session_id)]
    assert charged.count(nested[-1].run_id) == 1  # the cut call, in the parent's session


async def test_a_child_reads_calls_written_as_text_when_its_parent_does(
    store: SqlStore, session_id: str
) -> None:
    written = '<tool_call>{"name": "lookup", "arguments": {"key": "a"}}</tool_call>'
    script = [
        tool_reply(delegate("d1", "look a up")),
        text_reply(written),
        text_reply("a is found"),
        text_reply("the parent goes on"),
    ]
    runtime, provider = make(store, script, limits=RuntimeLimits(text_tool_calls=True))

    events = await events_of(runtime, session_id, "go")

    assert result_of(events, "d1").output.endswith("a is found")
    [result] = [m for m in provider.requests[2].messages if m.role == "tool"]
    assert (result.name, result.text) == ("lookup", "value of a")
    assert isinstance(events[-1], RunCompleted)


async def test_the_child_runs_on_the_parents_chosen_model(store: SqlStore, session_id: str) -> None:
    script = [
        tool_reply(delegate("d1", "child task")),
        text_reply("child answer"),
        text_reply("parent answer"),
    ]
    provider = ScriptedProvider(script)
    choices = ModelChoices(
        default_provider=provider,
        default_model="test-model",
        allowed=(ModelOption(provider="scripted", model="chosen-model"),),
        providers={"scripted": provider},
    )
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry([]), store=store, models=choices
    )
    runtime.tools.add(Subagents(runtime).tool())

    async with asyncio.timeout(PATIENCE):
        events = [
            e
            async for e in runtime.run(
                session_id, Message.user("go"), channel(), model="chosen-model"
            )
        ]

    assert isinstance(events[-1], RunCompleted)
    assert [asked(r) for r in provider.requests] == ["go", "child task", "go"]
    assert [r.model for r in provider.requests] == ["chosen-model"] * 3


async def test_the_childs_cost_counts_to_the_parent_sessions_budget_and_cost(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "costly task")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "a"})),
        text_reply("child answer"),
        text_reply("never asked"),
    ]
    runtime, provider = make(
        store,
        script,
        limits=RuntimeLimits(max_spend_usd=0.025),
        cost=lambda _model, _usage: 0.01,
    )

    events = await events_of(runtime, session_id, "go")

    assert result_of(events, "d1").output == "child answer"
    # $0.01 of the parent's and $0.02 of the child's: the session's $0.025 is spent.
    assert isinstance(events[-1], RunFailed) and events[-1].failure == "budget"
    assert len(provider.requests) == 3
    assert (await store.cost_summary(session_id)).cost_usd == pytest.approx(0.03)


async def test_a_child_stops_when_the_parent_sessions_spending_limit_is_reached(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "costly task")),
        tool_reply(ToolCall(id="l1", name="lookup", arguments={"key": "a"})),
        text_reply("never asked: the session is spent"),
    ]
    runtime, provider = make(
        store,
        script,
        limits=RuntimeLimits(max_spend_usd=0.015),
        cost=lambda _model, _usage: 0.01,
    )

    events = await events_of(runtime, session_id, "go")

    result = result_of(events, "d1")
    assert result.is_error and "spending limit of $0.015" in result.output
    assert len(provider.requests) == 2  # the parent's, the child's first; then refused
    assert isinstance(events[-1], RunFailed) and events[-1].failure == "budget"


class OneImage:
    """An image endpoint that always draws the same few bytes."""

    model = "image-model"

    async def generate(self, prompt: str) -> GeneratedImage:
        return GeneratedImage(data=b"\x89PNG\r\n\x1a\n", media_type="image/png", suffix=".png")


async def test_an_image_a_child_makes_is_charged_to_the_parent_session(
    store: SqlStore, session_id: str
) -> None:
    script = [
        tool_reply(delegate("d1", "draw it")),
        tool_reply(ToolCall(id="g1", name=GENERATE_IMAGE, arguments={"prompt": "a cat"})),
        text_reply("drawn"),
        text_reply("the parent goes on"),
    ]
    bus = MemoryBus()
    try:
        runtime, _ = make(store, script)
        runtime.tools.add(generate_image_tool(OneImage(), FileDrop(bus), store, price=0.04))
        events = await events_of(runtime, session_id, "go")
    finally:
        await bus.close()

    assert result_of(events, "d1").output == "drawn"
    images = [e for e in await store.cost_entries(session_id) if e.provider == "images"]
    assert [e.cost_usd for e in images] == [0.04]
    assert await store.cost_entries(f"{session_id}/sub/d1") == []


class NoArrivals:
    """The `Arrivals` of a turn nobody writes to meanwhile."""

    async def joining(self, step: int) -> list[Arrival]:
        return []

    async def answer(self, user_id: str) -> Arrival | None:
        return None

    async def joined(self, arrival: Arrival) -> None:
        raise AssertionError("nothing arrived")


async def test_a_child_is_not_offered_ask_user(store: SqlStore, session_id: str) -> None:
    """A child answers its parent, never the person: it cannot ask them a question."""
    script: list[ScriptStep] = [
        tool_reply(delegate("d1", "Find the capital of France.")),
        text_reply("Paris."),
        text_reply("Paris."),
    ]
    runtime, provider = make(store, script)
    runtime.tools.add(ask_user_tool(Confirmations(bus=MemoryBus()), timeout=PATIENCE))

    question = Message.user("What is the capital of France?")
    async with asyncio.timeout(PATIENCE):
        # With arrivals, as a person's turn from a mailbox has: the parent is offered ask_user.
        [_ async for _ in runtime.run(session_id, question, channel(), arrivals=NoArrivals())]

    assert ASK_USER in [t.name for t in provider.requests[0].tools]  # the parent has it
    assert [t.name for t in provider.requests[1].tools] == ["lookup"]
