"""Runtime hooks: when they are called, blocking and patching tool calls, and a hook that
raises being ignored. Driven by a scripted provider against the real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.compaction import Compactor
from core.errors import ProviderError
from core.events import (
    AgentEvent,
    Cancelled,
    Compacted,
    ModelEvent,
    RunCompleted,
    RunFailed,
    ToolFinished,
)
from core.hooks import HookChain, Hooks, ModelCompletion, NoHooks, TurnEnd
from core.messages import Message, ToolCall
from core.modes import FULL
from core.providers import ModelRequest, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WORDS = "lorem ipsum dolor sit amet " * 8


class NoArgs(BaseModel):
    """A tool that takes no arguments."""


class Recorder(NoHooks):
    """Writes down every hook point it reaches, as `<name>:<point>[:detail]`."""

    def __init__(self, log: list[str], name: str = "r") -> None:
        self.log = log
        self.name = name

    async def before_model(self, request: ModelRequest) -> None:
        self.log.append(f"{self.name}:before_model:{len(request.messages)}")

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        calls = ",".join(c.name for c in completion.tool_calls)
        self.log.append(f"{self.name}:after_model:{completion.text}{calls}")

    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        self.log.append(f"{self.name}:before_tool_call:{call.name}:{context.session_id != ''}")
        return None

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        self.log.append(f"{self.name}:after_tool_call:{output}:{is_error}")
        return output

    async def on_compaction(self, event: Compacted) -> None:
        self.log.append(f"{self.name}:on_compaction")

    async def on_agent_end(self, event: TurnEnd) -> None:
        self.log.append(f"{self.name}:on_agent_end:{event.kind}")


class Blocker(NoHooks):
    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        return f"{call.name} is blocked by policy."


class Patcher(NoHooks):
    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        return output + self.suffix


class Broken:
    """Every hook point raises."""

    async def before_model(self, request: ModelRequest) -> None:
        raise RuntimeError("boom")

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        raise RuntimeError("boom")

    async def before_tool_call(self, call: ToolCall, context: ToolContext) -> str | None:
        raise RuntimeError("boom")

    async def after_tool_call(self, call: ToolCall, output: str, is_error: bool) -> str:
        raise RuntimeError("boom")

    async def on_compaction(self, event: Compacted) -> None:
        raise RuntimeError("boom")

    async def on_agent_end(self, event: TurnEnd) -> None:
        raise RuntimeError("boom")


def echo_tool(ran: list[str]) -> Tool[Any]:
    async def run(_args: NoArgs, _ctx: ToolContext) -> str:
        ran.append("echo")
        return "echoed"

    return Tool(name="echo", description="Echo.", args=NoArgs, tier=SafetyTier.READ_ONLY, run=run)


def make_runtime(
    store: SqlStore, script: Iterable[ScriptStep], tools: Iterable[Tool[Any]], hooks: Hooks
) -> tuple[AgentRuntime, ScriptedProvider]:
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider, model="test-model", tools=ToolRegistry(tools), store=store, hooks=hooks
    )
    return runtime, provider


def context() -> ChannelContext:
    return ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")


async def run_turn(runtime: AgentRuntime, session_id: str, text: str) -> list[AgentEvent]:
    return [e async for e in runtime.run(session_id, Message.user(text), context())]


def tool_turn() -> list[ScriptStep]:
    return [tool_reply(ToolCall(id="c1", name="echo", arguments={})), text_reply("Done.")]


async def test_hooks_are_called_in_order_through_a_turn_with_a_tool(
    store: SqlStore, session_id: str
) -> None:
    calls: list[str] = []
    ran: list[str] = []
    hooks = HookChain([Recorder(calls, "a"), Recorder(calls, "b")])
    runtime, _ = make_runtime(store, tool_turn(), [echo_tool(ran)], hooks)

    events = await run_turn(runtime, session_id, "echo please")

    assert isinstance(events[-1], RunCompleted)
    assert ran == ["echo"]
    assert calls == [
        "a:before_model:1",
        "b:before_model:1",
        "a:after_model:echo",
        "b:after_model:echo",
        "a:before_tool_call:echo:True",
        "b:before_tool_call:echo:True",
        "a:after_tool_call:echoed:False",
        "b:after_tool_call:echoed:False",
        "a:before_model:3",
        "b:before_model:3",
        "a:after_model:Done.",
        "b:after_model:Done.",
        "a:on_agent_end:run_completed",
        "b:on_agent_end:run_completed",
    ]


async def test_a_blocking_hook_stops_the_call_and_the_model_reads_its_reason(
    store: SqlStore, session_id: str
) -> None:
    calls: list[str] = []
    ran: list[str] = []
    hooks = HookChain([Blocker(), Recorder(calls)])
    runtime, provider = make_runtime(store, tool_turn(), [echo_tool(ran)], hooks)

    events = await run_turn(runtime, session_id, "echo please")

    assert ran == []
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert (finished.is_error, finished.output) == (True, "echo is blocked by policy.")
    assert provider.requests[1].messages[-1].text == "echo is blocked by policy."
    # The block decided: later hooks were not asked, but still see the (error) result.
    assert not any("before_tool_call" in c for c in calls)
    assert "r:after_tool_call:echo is blocked by policy.:True" in calls
    assert isinstance(events[-1], RunCompleted)


async def test_patches_compose_in_order_and_reach_the_model(
    store: SqlStore, session_id: str
) -> None:
    hooks = HookChain([Patcher(" [one]"), Patcher(" [two]")])
    runtime, provider = make_runtime(store, tool_turn(), [echo_tool([])], hooks)

    events = await run_turn(runtime, session_id, "echo please")

    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.output == "echoed [one] [two]"
    assert provider.requests[1].messages[-1].text == "echoed [one] [two]"


async def test_a_single_hook_needs_no_chain(store: SqlStore, session_id: str) -> None:
    runtime, provider = make_runtime(store, tool_turn(), [echo_tool([])], Patcher("!"))

    await run_turn(runtime, session_id, "echo please")

    assert provider.requests[1].messages[-1].text == "echoed!"


async def test_a_hook_that_raises_is_logged_and_ignored(
    store: SqlStore, session_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    ran: list[str] = []
    hooks = HookChain([Broken(), Recorder(calls), Patcher("+")])
    runtime, _ = make_runtime(store, tool_turn(), [echo_tool(ran)], hooks)

    events = await run_turn(runtime, session_id, "echo please")

    assert isinstance(events[-1], RunCompleted)
    assert events[-1].text == "Done."
    assert ran == ["echo"]
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert (finished.output, finished.is_error) == ("echoed+", False)
    assert calls[-1] == "r:on_agent_end:run_completed"
    ignored = {r.getMessage() for r in caplog.records if "hook Broken." in r.getMessage()}
    points = ("before_model", "after_model", "before_tool_call", "after_tool_call")
    assert ignored == {f"hook Broken.{p} raised; ignored" for p in (*points, "on_agent_end")}


async def test_on_agent_end_hears_a_failed_turn(store: SqlStore, session_id: str) -> None:
    calls: list[str] = []
    script: list[ScriptStep] = [ProviderError("server", "down", provider="scripted")]
    runtime, _ = make_runtime(store, script, [], Recorder(calls))

    events = await run_turn(runtime, session_id, "hi")

    assert isinstance(events[-1], RunFailed)
    assert calls == ["r:before_model:1", "r:on_agent_end:run_failed"]


async def test_on_agent_end_hears_a_cancelled_turn(store: SqlStore, session_id: str) -> None:
    calls: list[str] = []
    cancel = asyncio.Event()

    async def stalls(_request: ModelRequest) -> list[ModelEvent]:
        cancel.set()
        await asyncio.Event().wait()
        return []

    runtime, _ = make_runtime(store, [stalls], [], Recorder(calls))
    events = [
        e async for e in runtime.run(session_id, Message.user("hi"), context(), cancel=cancel)
    ]

    assert isinstance(events[-1], Cancelled)
    assert calls == ["r:before_model:1", "r:on_agent_end:cancelled"]


class Responder:
    """Answers every request with long text; summary requests get a short summary."""

    @property
    def name(self) -> str:
        return "responder"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        summary = request.system.startswith("You condense")
        for event in text_reply("SUMMARY" if summary else "answer " + WORDS):
            yield event


async def test_on_compaction_hears_every_compaction(store: SqlStore, session_id: str) -> None:
    calls: list[str] = []
    provider = Responder()
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        limits=RuntimeLimits(max_tokens=300),
        compactor=Compactor(
            provider,
            "test-model",
            keep_last=4,
            trigger_ratio=0.6,
            summary_max_tokens=200,
            clock=lambda: NOW,
        ),
        context_window=2_000,
        hooks=Recorder(calls),
    )

    compacted = 0
    for n in range(12):
        events = await run_turn(runtime, session_id, f"question {n} {WORDS}")
        compacted += sum(isinstance(e, Compacted) for e in events)

    assert compacted > 0
    assert calls.count("r:on_compaction") == compacted
    assert calls.count("r:on_agent_end:run_completed") == 12
