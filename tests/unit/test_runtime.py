"""`AgentRuntime`: the turn loop, driven by a scripted provider against the real SQLite store.

Concurrency is shown with events (each overlapping tool waits for the other to start), never
with wall-clock measurements; the only real waits are the two timeout tests, kept short.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from core.backends.sql.store import SqlStore, sqlite_url
from core.errors import ProviderError, StoreUnavailable
from core.events import (
    AgentEvent,
    Cancelled,
    Finished,
    ModelEvent,
    Progress,
    RetryEnded,
    RetryStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolFinished,
    ToolRequested,
)
from core.fencing import Fence
from core.messages import Message, ToolCall, Usage
from core.modes import FULL, NO_TOOLS, SAFE_CHAT, CapabilityMode
from core.outages import Patience
from core.providers import DEMO_NOTICE, DemoProvider, ModelRequest, ScriptedProvider
from core.providers.reliable import ReliableProvider, RetryPolicy
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.redact import REDACTED, Redactor
from core.runtime import (
    ANSWER_CUT_OFF,
    MODEL_TOO_SLOW,
    MODEL_UNAVAILABLE,
    AgentRuntime,
    ChannelContext,
    RuntimeLimits,
)
from core.store.turns import TurnClose
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry, builtin_tools

# How long a test waits for something that should happen at once before it fails instead of
# hanging; only reached when the behaviour under test is broken.
PATIENCE = 2.0
SECRET = "supersecretvalue123"

E = TypeVar("E")


class NoArgs(BaseModel):
    """A tool that takes no arguments."""


class CityArgs(BaseModel):
    city: str


def make_tool(
    name: str,
    run: Callable[[Any, ToolContext], Awaitable[str]],
    *,
    tier: SafetyTier = SafetyTier.READ_ONLY,
    args: type[BaseModel] = NoArgs,
) -> Tool[Any]:
    return Tool(name=name, description=f"The {name} test tool.", args=args, tier=tier, run=run)


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def context(mode: CapabilityMode = FULL) -> ChannelContext:
    return ChannelContext(platform="terminal", mode=mode, session_key="terminal:default:it")


def make_runtime(
    store: SqlStore,
    script: Iterable[ScriptStep],
    tools: Iterable[Tool[Any]] = (),
    **options: Any,
) -> tuple[AgentRuntime, ScriptedProvider]:
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry(tools), store=store, **options
    )
    return runtime, provider


async def run_turn(
    runtime: AgentRuntime,
    session_id: str,
    text: str,
    mode: CapabilityMode = FULL,
    *,
    cancel: asyncio.Event | None = None,
) -> list[AgentEvent]:
    return [
        event
        async for event in runtime.run(session_id, Message.user(text), context(mode), cancel=cancel)
    ]


def of_type(events: list[AgentEvent], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def assert_well_formed(messages: list[Message]) -> None:
    """Every tool call has exactly one result, right after its assistant message."""
    assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
    for index, message in enumerate(messages):
        if not message.tool_calls:
            continue
        count = len(message.tool_calls)
        results = messages[index + 1 : index + 1 + count]
        assert all(r.role == "tool" for r in results), messages
        assert sorted(r.tool_call_id or "" for r in results) == sorted(
            c.id for c in message.tool_calls
        )


async def never(_args: Any, _ctx: ToolContext) -> str:
    raise AssertionError("this tool must not run")


# --- one turn without tools ----------------------------------------------------------------


async def test_a_turn_without_tools_streams_the_answer_and_persists_both_messages(
    store: SqlStore, session_id: str
) -> None:
    usage = Usage(input_tokens=10, output_tokens=2)
    script: list[ScriptStep] = [
        [TextDelta(text="Hel"), TextDelta(text="lo"), Finished(usage=usage)],
        text_reply("Still here."),
    ]
    runtime, provider = make_runtime(store, script)

    events = await run_turn(runtime, session_id, "hi")

    assert [type(e) for e in events] == [RunStarted, TextDelta, TextDelta, RunCompleted]
    started, completed = events[0], events[-1]
    assert isinstance(started, RunStarted)
    assert (started.session_id, started.provider, started.model) == (
        session_id,
        "scripted",
        "test-model",
    )
    assert isinstance(completed, RunCompleted)
    assert completed.run_id == started.run_id
    assert (completed.text, completed.steps, completed.usage) == ("Hello", 1, usage)
    stored = await store.list_messages(session_id)
    assert [(m.seq, m.role, m.text) for m in stored] == [
        (1, "user", "hi"),
        (2, "assistant", "Hello"),
    ]
    assert stored[1].usage == usage

    await run_turn(runtime, session_id, "still there?")

    seen = provider.requests[-1].messages
    assert [(m.seq, m.role, m.text) for m in seen] == [
        (1, "user", "hi"),
        (2, "assistant", "Hello"),
        (3, "user", "still there?"),
    ]
    assert len(await store.list_messages(session_id)) == 4


async def test_the_request_carries_model_limits_and_a_system_prompt_with_the_mode_rules(
    store: SqlStore, session_id: str
) -> None:
    runtime, provider = make_runtime(
        store, [text_reply("ok")], limits=RuntimeLimits(max_tokens=321), temperature=0.3
    )

    await run_turn(runtime, session_id, "hi", SAFE_CHAT)

    request = provider.requests[0]
    assert (request.model, request.max_tokens, request.temperature) == ("test-model", 321, 0.3)
    assert SAFE_CHAT.prompt_rules in request.system
    assert session_id in request.system


async def test_usage_and_cost_add_up_over_the_steps_of_a_turn(
    store: SqlStore, session_id: str
) -> None:
    seen: list[tuple[str, Usage]] = []

    def cost(model: str, usage: Usage) -> float:
        seen.append((model, usage))
        return 0.25  # per model call

    first: list[ModelEvent] = [
        call("c1", "noop"),
        Finished(stop_reason="tool_use", usage=Usage(input_tokens=5)),
    ]
    script: list[ScriptStep] = [first, text_reply("done", usage=Usage(output_tokens=7))]

    async def noop(_args: NoArgs, _ctx: ToolContext) -> str:
        return "ok"

    runtime, _ = make_runtime(store, script, [make_tool("noop", noop)], cost=cost)

    completed = (await run_turn(runtime, session_id, "go"))[-1]

    assert isinstance(completed, RunCompleted)
    assert completed.usage == Usage(input_tokens=5, output_tokens=7)
    assert completed.cost_usd == 0.5
    assert seen == [("test-model", Usage(input_tokens=5)), ("test-model", Usage(output_tokens=7))]
    ledger = await store.cost_summary(session_id)
    assert (ledger.calls, ledger.cost_usd, ledger.unpriced_calls) == (2, 0.5, 0)
    assert ledger.usage == Usage(input_tokens=5, output_tokens=7)


# --- tool round trips ----------------------------------------------------------------------


async def test_a_tool_round_trip_feeds_the_result_back_and_persists_every_step(
    store: SqlStore, session_id: str
) -> None:
    contexts: list[ToolContext] = []

    async def weather(args: CityArgs, ctx: ToolContext) -> str:
        contexts.append(ctx)
        return f"sunny in {args.city}"

    script: list[ScriptStep] = [
        tool_reply(call("c1", "weather", city="Oslo"), text="Let me check. "),
        text_reply("It is sunny."),
    ]
    runtime, provider = make_runtime(store, script, [make_tool("weather", weather, args=CityArgs)])

    events = await run_turn(runtime, session_id, "weather in Oslo?")

    assert [type(e) for e in events] == [
        RunStarted,
        TextDelta,
        ToolRequested,
        ToolFinished,
        Progress,
        TextDelta,
        RunCompleted,
    ]
    requested, finished = of_type(events, ToolRequested)[0], of_type(events, ToolFinished)[0]
    assert (requested.call_id, requested.name, requested.arguments) == (
        "c1",
        "weather",
        {"city": "Oslo"},
    )
    assert (finished.call_id, finished.output, finished.is_error) == ("c1", "sunny in Oslo", False)
    assert of_type(events, Progress)[0].step == 2
    completed = events[-1]
    assert isinstance(completed, RunCompleted)
    assert (completed.text, completed.steps) == ("It is sunny.", 2)
    assert contexts[0].session_id == session_id
    assert contexts[0].platform == "terminal"

    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[1].tool_calls == [call("c1", "weather", city="Oslo")]
    assert (second[2].tool_call_id, second[2].name, second[2].text, second[2].is_error) == (
        "c1",
        "weather",
        "sunny in Oslo",
        False,
    )
    stored = await store.list_messages(session_id)
    assert stored[:3] == second
    assert [(m.seq, m.role, m.text) for m in stored] == [
        (1, "user", "weather in Oslo?"),
        (2, "assistant", "Let me check. "),
        (3, "tool", "sunny in Oslo"),
        (4, "assistant", "It is sunny."),
    ]


async def test_read_only_calls_overlap_and_side_effecting_calls_run_alone_in_order(
    store: SqlStore, session_id: str
) -> None:
    marks: list[tuple[str, str]] = []
    active: set[str] = set()
    overlaps: dict[str, set[str]] = {}
    entered = {"ro1": asyncio.Event(), "ro2": asyncio.Event()}

    def tracked(name: str, body: Callable[[], Awaitable[None]]) -> Tool[Any]:
        async def run(_args: NoArgs, _ctx: ToolContext) -> str:
            marks.append(("start", name))
            active.add(name)
            overlaps.setdefault(name, set()).update(active)
            await body()
            overlaps[name].update(active)
            active.discard(name)
            marks.append(("end", name))
            return f"{name} done"

        tier = SafetyTier.SIDE_EFFECTING if name.startswith("se") else SafetyTier.READ_ONLY
        return make_tool(name, run, tier=tier)

    def meets(me: str, other: str) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            entered[me].set()
            # Run one after the other, this times out (and the test fails) instead of hanging.
            await asyncio.wait_for(entered[other].wait(), PATIENCE)

        return body

    async def yields() -> None:
        # Hand the loop over a few times so anything running beside this call would show.
        for _ in range(5):
            await asyncio.sleep(0)

    tools = [
        tracked("ro1", meets("ro1", "ro2")),
        tracked("ro2", meets("ro2", "ro1")),
        tracked("ro3", yields),
        tracked("se1", yields),
        tracked("se2", yields),
    ]
    order = ["ro1", "ro2", "se1", "ro3", "se2"]
    script: list[ScriptStep] = [
        tool_reply(*(call(f"c-{name}", name) for name in order)),
        text_reply("all done"),
    ]
    runtime, provider = make_runtime(store, script, tools)

    events = await run_turn(runtime, session_id, "do it all")

    assert not [e for e in of_type(events, ToolFinished) if e.is_error], events
    assert {marks[0], marks[1]} == {("start", "ro1"), ("start", "ro2")}
    assert set(marks[:4]) == {("start", "ro1"), ("start", "ro2"), ("end", "ro1"), ("end", "ro2")}
    assert marks[4:] == [
        ("start", "se1"),
        ("end", "se1"),
        ("start", "ro3"),
        ("end", "ro3"),
        ("start", "se2"),
        ("end", "se2"),
    ]
    assert overlaps["se1"] == {"se1"}
    assert overlaps["se2"] == {"se2"}
    assert overlaps["ro3"] == {"ro3"}
    results = provider.requests[1].messages[2:]
    assert [(m.role, m.tool_call_id) for m in results] == [("tool", f"c-{n}") for n in order]
    assert_well_formed(await store.list_messages(session_id))


# --- tool errors go back to the model ------------------------------------------------------


async def _explode(_args: NoArgs, _ctx: ToolContext) -> str:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("bad_call", "expected"),
    [
        pytest.param(
            call("c1", "weather"), "Invalid arguments for weather: city: Field required", id="args"
        ),
        pytest.param(
            call("c1", "weather", city=["not", "a", "string"]),
            "Invalid arguments for weather: city:",
            id="arg-type",
        ),
        pytest.param(
            call("c1", "forecast"), "Unknown tool 'forecast'. Available tools:", id="unknown"
        ),
        pytest.param(
            call("c1", "explode"), "Tool 'explode' failed: RuntimeError: boom", id="raises"
        ),
        pytest.param(
            ToolCall(id="c1", name="weather", raw_arguments="not json"),
            "Arguments for weather must be a JSON object; got 'not json'",
            id="raw-arguments",
        ),
    ],
)
async def test_a_failing_call_becomes_an_error_result_and_the_loop_recovers(
    store: SqlStore, session_id: str, bad_call: ToolCall, expected: str
) -> None:
    tools = [make_tool("weather", never, args=CityArgs), make_tool("explode", _explode)]
    script: list[ScriptStep] = [tool_reply(bad_call), text_reply("Sorry, recovered.")]
    runtime, provider = make_runtime(store, script, tools)

    events = await run_turn(runtime, session_id, "try it")

    finished = of_type(events, ToolFinished)
    assert len(finished) == 1
    assert finished[0].is_error is True
    assert expected in finished[0].output
    result = provider.requests[1].messages[-1]
    assert (result.role, result.tool_call_id, result.is_error) == ("tool", "c1", True)
    assert result.text == finished[0].output
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "Sorry, recovered."
    assert_well_formed(await store.list_messages(session_id))


async def test_unknown_tool_error_lists_the_known_tools(store: SqlStore, session_id: str) -> None:
    script: list[ScriptStep] = [tool_reply(call("c1", "nope")), text_reply("ok")]
    runtime, _ = make_runtime(store, script, builtin_tools())

    events = await run_turn(runtime, session_id, "go")

    assert of_type(events, ToolFinished)[0].output == (
        "Unknown tool 'nope'. Available tools: calculator, current_time."
    )


async def test_a_huge_tool_output_is_cut_before_the_model_sees_it(
    store: SqlStore, session_id: str
) -> None:
    async def flood(_args: NoArgs, _ctx: ToolContext) -> str:
        return "x" * 50_000

    script: list[ScriptStep] = [tool_reply(call("c1", "flood")), text_reply("ok")]
    runtime, provider = make_runtime(store, script, [make_tool("flood", flood)])

    await run_turn(runtime, session_id, "go")

    seen = provider.requests[1].messages[-1].text
    assert seen.startswith("x" * 16_000)
    assert seen.endswith("[output cut at 16000 characters]")
    assert len(seen) < 16_100


# --- budgets and timeouts ------------------------------------------------------------------


async def test_a_model_that_always_calls_a_tool_stops_after_max_steps(
    store: SqlStore, session_id: str
) -> None:
    async def noop(_args: NoArgs, _ctx: ToolContext) -> str:
        return "ok"

    script: list[ScriptStep] = [tool_reply(call(f"c{i}", "noop")) for i in range(10)]
    runtime, provider = make_runtime(
        store, script, [make_tool("noop", noop)], limits=RuntimeLimits(max_steps=3)
    )

    events = await run_turn(runtime, session_id, "loop forever")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "budget"
    assert "3 steps" in failed.message
    assert len(provider.requests) == 3
    assert len(of_type(events, ToolFinished)) == 3
    stored = await store.list_messages(session_id)
    assert len(stored) == 1 + 3 * 2
    assert_well_formed(stored)


async def test_a_provider_that_does_not_answer_in_time_fails_the_turn_with_timeout(
    store: SqlStore, session_id: str
) -> None:
    never_set = asyncio.Event()
    gave_up = asyncio.Event()

    async def stalls(_request: ModelRequest) -> list[Any]:
        try:
            await never_set.wait()
        finally:
            gave_up.set()
        return []

    # As `bots/` wires it: the deadline belongs to the reliability wrapper, one per attempt.
    policy = RetryPolicy(max_attempts=1, call_timeout=0.2)
    runtime = AgentRuntime(
        provider=ReliableProvider(ScriptedProvider([stalls]), policy=policy),
        model="m",
        tools=ToolRegistry(),
        store=store,
    )

    events = await run_turn(runtime, session_id, "hello?")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "timeout"
    assert failed.message == MODEL_TOO_SLOW
    assert gave_up.is_set()
    assert [m.role for m in await store.list_messages(session_id)] == ["user"]


async def test_an_overloaded_model_is_reported_as_unavailable_not_as_slow(
    store: SqlStore, session_id: str
) -> None:
    """The retry waits of an overload storm are not the model being slow."""
    overloaded = ProviderError("overloaded", "529", provider="scripted", retry_after=0.15)
    policy = RetryPolicy(max_attempts=3, max_seconds=5, call_timeout=0.1)
    runtime = AgentRuntime(
        provider=ReliableProvider(ScriptedProvider([overloaded] * 3), policy=policy),
        model="m",
        tools=ToolRegistry(),
        store=store,
    )

    events = await run_turn(runtime, session_id, "hello?")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "provider"
    assert failed.message == MODEL_UNAVAILABLE


async def test_a_retried_model_call_shows_its_retries_among_the_turn_events(
    store: SqlStore, session_id: str
) -> None:
    async def no_wait(_seconds: float) -> None:
        """The retry's wait, made at once."""

    overloaded = ProviderError("overloaded", "529", provider="scripted", retry_after=4.0)
    runtime = AgentRuntime(
        provider=ReliableProvider(
            ScriptedProvider([overloaded, text_reply("there you are")]), sleep=no_wait
        ),
        model="m",
        tools=ToolRegistry(),
        store=store,
    )

    events = await run_turn(runtime, session_id, "hello?")

    [started] = of_type(events, RetryStarted)
    [ended] = of_type(events, RetryEnded)
    assert (started.attempt, started.wait_s, started.error_kind) == (2, 4.0, "overloaded")
    assert (ended.attempts, ended.outcome) == (2, "succeeded")
    assert events.index(started) < events.index(ended) < events.index(of_type(events, TextDelta)[0])
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "there you are"


async def test_a_tool_that_does_not_finish_in_time_becomes_an_error_and_the_loop_continues(
    store: SqlStore, session_id: str
) -> None:
    never_set = asyncio.Event()
    cancelled = asyncio.Event()

    async def stuck(_args: NoArgs, _ctx: ToolContext) -> str:
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    script: list[ScriptStep] = [tool_reply(call("c1", "stuck")), text_reply("It hung, sorry.")]
    runtime, provider = make_runtime(
        store, script, [make_tool("stuck", stuck)], limits=RuntimeLimits(tool_timeout=0.2)
    )

    events = await run_turn(runtime, session_id, "go")

    finished = of_type(events, ToolFinished)[0]
    assert finished.is_error is True
    assert "'stuck' timed out after 0.2s" in finished.output
    assert cancelled.is_set()
    assert provider.requests[1].messages[-1].text == finished.output
    assert isinstance(events[-1], RunCompleted)


# --- provider failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("overloaded", MODEL_UNAVAILABLE),
        (
            "auth",
            "I cannot reach my model because of a setup problem on the bot's side; "
            "the operator can find the details in the log.",
        ),
        ("content_blocked", "The model declined to answer that request."),
        (
            "context_overflow",
            "This conversation is too long for the model. Send /new to start afresh.",
        ),
    ],
)
async def test_a_provider_error_fails_the_turn_with_a_message_for_the_user(
    store: SqlStore, session_id: str, kind: Any, message: str
) -> None:
    error = ProviderError(kind, f"upstream said no (key {SECRET})", provider="scripted")
    runtime, _ = make_runtime(store, [error], redactor=Redactor([SECRET]))

    events = await run_turn(runtime, session_id, "hi")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert (failed.failure, failed.message) == ("provider", message)
    assert kind in failed.detail
    assert SECRET not in failed.detail
    assert REDACTED in failed.detail


async def test_an_unexpected_provider_exception_fails_the_turn_as_internal(
    store: SqlStore, session_id: str
) -> None:
    runtime, _ = make_runtime(
        store, [ValueError(f"bad state {SECRET}")], redactor=Redactor([SECRET])
    )

    events = await run_turn(runtime, session_id, "hi")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.failure == "internal"
    assert "ValueError" in failed.detail
    assert SECRET not in failed.detail


# --- cancellation --------------------------------------------------------------------------


async def test_cancelling_during_a_tool_stops_it_and_leaves_the_history_well_formed(
    store: SqlStore, session_id: str
) -> None:
    started, never_set, tool_cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()
    cancel = asyncio.Event()

    async def quick(_args: NoArgs, _ctx: ToolContext) -> str:
        return "quick result"

    async def slow(_args: NoArgs, _ctx: ToolContext) -> str:
        started.set()
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            tool_cancelled.set()
            raise
        return "unreachable"

    tools = [make_tool("quick", quick), make_tool("slow", slow, tier=SafetyTier.SIDE_EFFECTING)]
    script: list[ScriptStep] = [
        tool_reply(call("c1", "quick"), call("c2", "slow")),
        text_reply("next turn works"),
    ]
    runtime, provider = make_runtime(store, script, tools)

    async def cancel_once_slow_runs() -> None:
        await started.wait()
        cancel.set()

    canceller = asyncio.create_task(cancel_once_slow_runs())
    events = await run_turn(runtime, session_id, "go", cancel=cancel)
    await canceller

    first, last = events[0], events[-1]
    assert isinstance(first, RunStarted)
    assert isinstance(last, Cancelled)
    assert last.run_id == first.run_id
    assert tool_cancelled.is_set()
    stored = await store.list_messages(session_id)
    assert_well_formed(stored)
    assert [(m.role, m.tool_call_id, m.is_error) for m in stored[2:]] == [
        ("tool", "c1", False),
        ("tool", "c2", True),
    ]
    assert "cancelled" in stored[3].text

    events = await run_turn(runtime, session_id, "again")

    assert isinstance(events[-1], RunCompleted)
    assert_well_formed(provider.requests[-1].messages)


async def test_cancelling_while_the_model_thinks_ends_the_turn_at_once(
    store: SqlStore, session_id: str
) -> None:
    asked, never_set, provider_cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()
    cancel = asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[Any]:
        asked.set()
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            provider_cancelled.set()
            raise
        return []

    runtime, _ = make_runtime(store, [thinks])

    async def cancel_once_asked() -> None:
        await asked.wait()
        cancel.set()

    canceller = asyncio.create_task(cancel_once_asked())
    events = await run_turn(runtime, session_id, "go", cancel=cancel)
    await canceller

    assert [type(e) for e in events] == [RunStarted, Cancelled]
    assert provider_cancelled.is_set()
    assert [m.role for m in await store.list_messages(session_id)] == ["user"]


async def test_closing_the_event_stream_early_cancels_the_turn(
    store: SqlStore, session_id: str
) -> None:
    never_set, provider_cancelled = asyncio.Event(), asyncio.Event()
    asked = asyncio.Event()

    async def thinks(_request: ModelRequest) -> list[Any]:
        asked.set()
        try:
            await never_set.wait()
        except asyncio.CancelledError:
            provider_cancelled.set()
            raise
        return []

    runtime, _ = make_runtime(store, [thinks])

    stream = runtime.run(session_id, Message.user("go"), context())
    assert isinstance(stream, AsyncGenerator)
    async with contextlib.aclosing(stream) as events:
        async for event in events:
            assert isinstance(event, RunStarted)
            await asked.wait()  # the model call is under way when the stream is closed
            break

    assert provider_cancelled.is_set()


# --- capability modes ----------------------------------------------------------------------


async def test_a_tool_outside_the_mode_is_not_offered_and_refused_when_named(
    store: SqlStore, session_id: str
) -> None:
    sent: list[str] = []

    async def send_email(_args: NoArgs, _ctx: ToolContext) -> str:
        sent.append("sent")
        return "sent"

    tools = [make_tool("send_email", send_email, tier=SafetyTier.SIDE_EFFECTING), *builtin_tools()]
    script: list[ScriptStep] = [tool_reply(call("c1", "send_email")), text_reply("I cannot.")]
    runtime, provider = make_runtime(store, script, tools)

    events = await run_turn(runtime, session_id, "email bob", SAFE_CHAT)

    assert [t.name for t in provider.requests[0].tools] == ["calculator", "current_time"]
    finished = of_type(events, ToolFinished)[0]
    assert finished.is_error is True
    assert finished.output == (
        "Tool 'send_email' is not available in this chat (capability mode 'safe-chat')."
    )
    assert provider.requests[1].messages[-1].text == finished.output
    assert sent == []
    assert isinstance(events[-1], RunCompleted)


async def test_no_tools_mode_offers_nothing_and_refuses_even_the_calculator(
    store: SqlStore, session_id: str
) -> None:
    script: list[ScriptStep] = [
        tool_reply(call("c1", "calculator", expression="1+1")),
        text_reply("Two."),
    ]
    runtime, provider = make_runtime(store, script, builtin_tools())

    events = await run_turn(runtime, session_id, "1+1?", NO_TOOLS)

    assert provider.requests[0].tools == []
    finished = of_type(events, ToolFinished)[0]
    assert finished.is_error is True
    assert "capability mode 'no-tools'" in finished.output
    assert "2" not in finished.output


async def test_full_mode_offers_every_tool_in_name_order_but_refuses_privileged_calls(
    store: SqlStore, session_id: str
) -> None:
    tools = [
        make_tool("wipe_disk", never, tier=SafetyTier.PRIVILEGED),
        make_tool("send_email", never, tier=SafetyTier.SIDE_EFFECTING),
        *builtin_tools(),
    ]
    script: list[ScriptStep] = [tool_reply(call("c1", "wipe_disk")), text_reply("Not without you.")]
    runtime, provider = make_runtime(store, script, tools)

    events = await run_turn(runtime, session_id, "wipe it", FULL)

    assert [t.name for t in provider.requests[0].tools] == [
        "calculator",
        "current_time",
        "send_email",
        "wipe_disk",
    ]
    finished = of_type(events, ToolFinished)[0]
    assert finished.is_error is True
    assert "needs a confirmation" in finished.output


# --- secrets -------------------------------------------------------------------------------


async def test_a_configured_secret_in_tool_output_never_reaches_the_model_or_the_events(
    store: SqlStore, session_id: str
) -> None:
    async def leaky(_args: NoArgs, _ctx: ToolContext) -> str:
        return f"config: token={SECRET} region=eu"

    async def leaky_error(_args: NoArgs, _ctx: ToolContext) -> str:
        raise RuntimeError(f"could not log in with {SECRET}")

    tools = [make_tool("leaky", leaky), make_tool("leaky_error", leaky_error)]
    script: list[ScriptStep] = [
        tool_reply(call("c1", "leaky"), call("c2", "leaky_error")),
        text_reply("done"),
    ]
    runtime, provider = make_runtime(store, script, tools, redactor=Redactor([SECRET]))

    events = await run_turn(runtime, session_id, "show config")

    finished = {e.call_id: e for e in of_type(events, ToolFinished)}
    assert finished["c1"].output == f"config: token={REDACTED} region=eu"
    assert REDACTED in finished["c2"].output
    seen = provider.requests[1].messages
    stored = await store.list_messages(session_id)
    for text in [
        *(m.text for m in seen),
        *(m.text for m in stored),
        *(e.output for e in finished.values()),
    ]:
        assert SECRET not in text
    assert seen[-2].text == f"config: token={REDACTED} region=eu"


# --- the demo provider, end to end ---------------------------------------------------------


async def test_the_demo_provider_uses_the_real_calculator_and_shows_its_notice_once(
    store: SqlStore, session_id: str
) -> None:
    runtime = AgentRuntime(
        provider=DemoProvider(),
        model="demo-1",
        tools=ToolRegistry(builtin_tools()),
        store=store,
    )

    first = await run_turn(runtime, session_id, "what is 17*23?")

    requested = of_type(first, ToolRequested)
    assert [(r.name, r.arguments) for r in requested] == [("calculator", {"expression": "17*23"})]
    assert of_type(first, ToolFinished)[0].is_error is False
    done = first[-1]
    assert isinstance(done, RunCompleted)
    assert "391" in done.text
    assert done.text.count(DEMO_NOTICE) == 1
    assert "".join(e.text for e in of_type(first, TextDelta)) == done.text

    second = await run_turn(runtime, session_id, "thanks")

    again = second[-1]
    assert isinstance(again, RunCompleted)
    assert DEMO_NOTICE not in again.text
    assert "thanks" in again.text
    stored = await store.list_messages(session_id)
    assert sum(m.text.count(DEMO_NOTICE) for m in stored) == 1
    assert_well_formed(stored)


# --- crash recovery --------------------------------------------------------------------------


async def test_a_repeated_turn_resumes_instead_of_storing_the_message_again(
    store: SqlStore, session_id: str
) -> None:
    # A worker stored the user message and a tool call, then died before the tool ran.
    source = "telegram:1:555:42"
    await store.append_message(session_id, Message.user("what is 2+2", source=source))
    await store.append_message(
        session_id, Message.assistant("", [call("c1", "calculator", expression="2+2")])
    )
    runtime, provider = make_runtime(store, [text_reply("It is 4.")], builtin_tools())

    events = [
        e
        async for e in runtime.run(
            session_id, Message.user("what is 2+2", source=source), context(FULL)
        )
    ]

    assert isinstance(events[-1], RunCompleted) and events[-1].text == "It is 4."
    stored = await store.list_messages(session_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].is_error and "interrupted" in stored[2].text
    assert [m.role for m in provider.requests[0].messages] == ["user", "assistant", "tool"]


async def test_a_repeated_turn_that_had_answered_is_not_asked_again(
    store: SqlStore, session_id: str
) -> None:
    source = "telegram:1:555:43"
    await store.append_message(session_id, Message.user("hi", source=source))
    await store.append_message(session_id, Message.assistant("Hello!"))
    runtime, provider = make_runtime(store, [])

    events = [
        e async for e in runtime.run(session_id, Message.user("hi", source=source), context())
    ]

    assert isinstance(events[-1], RunCompleted) and events[-1].text == "Hello!"
    assert provider.requests == []
    assert len(await store.list_messages(session_id)) == 2


async def test_the_same_text_from_another_message_is_a_new_turn(
    store: SqlStore, session_id: str
) -> None:
    await store.append_message(session_id, Message.user("hi", source="m1"))
    await store.append_message(session_id, Message.assistant("Hello!"))
    runtime, _ = make_runtime(store, [text_reply("Hello again!")])

    await run_turn(runtime, session_id, "hi")

    assert [m.text for m in await store.list_messages(session_id)] == [
        "hi",
        "Hello!",
        "hi",
        "Hello again!",
    ]


async def test_turns_alternating_between_runtimes_on_one_store_see_the_whole_history(
    store: SqlStore, session_id: str
) -> None:
    # Two workers sharing a store: each keeps its own history cache between turns, yet each
    # request carries every message stored so far, by either of them, in order.
    first, first_provider = make_runtime(store, [text_reply("a1"), text_reply("a3")])
    second, second_provider = make_runtime(store, [text_reply("a2")])

    await run_turn(first, session_id, "q1")
    await run_turn(second, session_id, "q2")
    await run_turn(first, session_id, "q3")

    sent = [m.text for m in first_provider.requests[-1].messages]
    assert sent == ["q1", "a1", "q2", "a2", "q3"]
    assert [m.text for m in second_provider.requests[-1].messages] == ["q1", "a1", "q2"]
    stored = await store.list_messages(session_id)
    assert [m.text for m in stored] == ["q1", "a1", "q2", "a2", "q3", "a3"]


class _HalfThenWait:
    """Streams some text, then waits (for a cancel) or breaks (a stream cut off)."""

    name = "half"

    def __init__(self, *, breaks: bool) -> None:
        self.breaks = breaks
        self.streamed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="Half of an ans")
        self.streamed.set()
        if self.breaks:
            raise ProviderError("server", "the stream was cut off", provider="half")
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_a_cancelled_answer_is_charged_and_kept_as_cancelled(
    store: SqlStore, session_id: str
) -> None:
    """Ctrl-C while the answer streams: what it cost is in the ledger, its text in the history."""
    provider = _HalfThenWait(breaks=False)
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry(), store=store)
    cancel = asyncio.Event()

    async def cancel_once_streaming() -> None:
        await provider.streamed.wait()
        cancel.set()

    canceller = asyncio.create_task(cancel_once_streaming())
    events = await run_turn(runtime, session_id, "tell me a long story", cancel=cancel)
    await canceller

    assert isinstance(events[-1], Cancelled)
    stored = await store.list_messages(session_id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].text == "Half of an ans\n\n[This answer was cancelled here by the person.]"
    spent = await store.cost_summary(session_id)
    assert spent.calls == 1
    assert spent.usage.input_tokens > 0 and spent.usage.output_tokens > 0


async def test_a_stream_cut_after_text_says_so_and_keeps_the_text_as_cut(
    store: SqlStore, session_id: str
) -> None:
    runtime = AgentRuntime(
        provider=_HalfThenWait(breaks=True), model="m", tools=ToolRegistry(), store=store
    )

    events = await run_turn(runtime, session_id, "tell me a long story")

    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.message == ANSWER_CUT_OFF
    stored = await store.list_messages(session_id)
    assert stored[-1].role == "assistant"
    assert stored[-1].text.startswith("Half of an ans\n\n[This answer was cut off here")
    assert (await store.cost_summary(session_id)).calls == 1


# --- the store away ------------------------------------------------------------------------


class _AwayStore(SqlStore):
    """Refuses the next `refusals` closes of a step with an answer, as a database does while
    it restarts."""

    refusals = 0

    async def close_turn(self, closing: TurnClose, *, fence: Fence | None = None) -> list[Message]:
        if any(m.role == "assistant" for m in closing.messages) and self.refusals:
            self.refusals -= 1
            raise StoreUnavailable("SQL store could not close a step: Connection refused")
        return await super().close_turn(closing, fence=fence)


@pytest.fixture
async def away(tmp_path: Path) -> AsyncIterator[_AwayStore]:
    opened = await _AwayStore.open(sqlite_url(tmp_path / "away.db"))
    assert isinstance(opened, _AwayStore)
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_answer_the_store_could_not_take_is_written_once_it_is_back(
    away: _AwayStore,
) -> None:
    session = await away.current_session("terminal:default:it")
    runtime, provider = make_runtime(away, [text_reply("Hello!")])
    away.refusals = 1

    events = await run_turn(runtime, session.id, "hi")

    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "Hello!"
    assert len(provider.requests) == 1  # the answer was kept, not asked for again
    assert [m.text for m in await away.list_messages(session.id)] == ["hi", "Hello!"]


async def test_an_outage_longer_than_the_patience_ends_the_turn_without_an_apology(
    away: _AwayStore,
) -> None:
    session = await away.current_session("terminal:default:it")
    runtime, _ = make_runtime(away, [text_reply("Hello!")], patience=Patience(budget=0))
    away.refusals = 100
    events: list[AgentEvent] = []

    with pytest.raises(StoreUnavailable):
        async for event in runtime.run(session.id, Message.user("hi"), context()):
            events.append(event)

    # The worker keeps the message and runs the turn again once the store is back.
    assert of_type(events, RunFailed) == []
    assert [m.text for m in await away.list_messages(session.id)] == ["hi"]
