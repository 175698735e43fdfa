"""A tool result over the cut is kept whole (scrubbed) and the model reads on with
`read_tool_output`: the runtime against the real SQLite store, a scripted model."""

from __future__ import annotations

from typing import Any

from core.backends.sql.store import SqlStore
from core.events import RunCompleted
from core.messages import Message, ToolCall
from core.modes import FULL, SAFE_CHAT
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.redact import REDACTED, Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.tool_calls import MAX_TOOL_OUTPUT
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.tools.tool_output import READ_CHUNK, read_tool_output_tool
from tests.unit.test_runtime import NoArgs

SECRET = "supersecretvalue123"
# 40,000 characters, every line distinct, a secret deep in the part the model is not shown.
LINES = [f"line {i:05d}\n" for i in range(3_500)]
LINES[2_000] = f"token={SECRET}\n"
WHOLE = "".join(LINES)


async def listing(_args: NoArgs, _ctx: ToolContext) -> str:
    return WHOLE


def reads(call_id: str, offset: int) -> ToolCall:
    return ToolCall(
        id=f"r{offset}",
        name="read_tool_output",
        arguments={"call_id": call_id, "offset": offset},
    )


def runtime_with(
    store: SqlStore, script: list[ScriptStep]
) -> tuple[AgentRuntime, ScriptedProvider]:
    provider = ScriptedProvider(script)
    tools: list[Tool[Any]] = [
        Tool(
            name="listing",
            description="A long listing.",
            args=NoArgs,
            tier=SafetyTier.READ_ONLY,
            run=listing,
        ),
        read_tool_output_tool(store),
    ]
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry(tools),
        store=store,
        redactor=Redactor([SECRET]),
        tool_outputs=store,
    )
    return runtime, provider


async def test_a_cut_result_is_kept_whole_and_read_to_its_end(
    store: SqlStore, session_id: str
) -> None:
    scrubbed = WHOLE.replace(SECRET, REDACTED)
    second = MAX_TOOL_OUTPUT + READ_CHUNK
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="listing", arguments={})),
        tool_reply(reads("c1", MAX_TOOL_OUTPUT)),
        tool_reply(reads("c1", second)),
        text_reply("read it all"),
    ]
    runtime, provider = runtime_with(store, script)
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")

    events = [e async for e in runtime.run(session_id, Message.user("list"), context)]

    assert isinstance(events[-1], RunCompleted)
    cut = provider.requests[1].messages[-1].text
    assert cut.startswith(scrubbed[:MAX_TOOL_OUTPUT])
    assert cut.endswith(
        f"[output cut at {MAX_TOOL_OUTPUT} of {len(scrubbed)} characters; "
        f'read_tool_output(call_id="c1", offset={MAX_TOOL_OUTPUT}) reads on]'
    )
    first_read = provider.requests[2].messages[-1].text
    last_read = provider.requests[3].messages[-1].text
    assert first_read.endswith(
        f"[characters {MAX_TOOL_OUTPUT}-{second} of {len(scrubbed)}; "
        f'read_tool_output(call_id="c1", offset={second}) reads on]'
    )
    assert last_read.endswith(f"[characters {second}-{len(scrubbed)} of {len(scrubbed)}; the end]")
    pieces = [cut, first_read, last_read]
    assert "".join(p[: p.rindex("\n[")] for p in pieces) == scrubbed
    # Kept scrubbed, like everything else the model or the store sees.
    assert await store.tool_output(session_id, "c1") == scrubbed
    assert SECRET not in "".join(pieces)


async def test_reading_a_call_never_cut_or_past_the_end_is_an_error_the_model_reads(
    store: SqlStore, session_id: str
) -> None:
    await store.keep_tool_output(session_id, "c9", "short")
    script: list[ScriptStep] = [
        tool_reply(
            reads("c1", 0),
            ToolCall(id="past", name="read_tool_output", arguments={"call_id": "c9", "offset": 5}),
        ),
        text_reply("ok"),
    ]
    runtime, provider = runtime_with(store, script)
    context = ChannelContext(platform="terminal", mode=SAFE_CHAT, session_key="terminal:default:it")

    [e async for e in runtime.run(session_id, Message.user("read"), context)]

    results = {m.tool_call_id: m for m in provider.requests[1].messages if m.role == "tool"}
    assert results["r0"].is_error
    assert "No cut output of a call 'c1'" in results["r0"].text
    assert results["past"].is_error
    assert "past the end (5 characters)" in results["past"].text


async def test_without_a_store_for_them_a_cut_output_says_only_that_it_was_cut(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider(
        [tool_reply(ToolCall(id="c1", name="listing", arguments={})), text_reply("ok")]
    )
    tool = Tool(
        name="listing",
        description="A long listing.",
        args=NoArgs,
        tier=SafetyTier.READ_ONLY,
        run=listing,
    )
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([tool]), store=store)
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")

    [e async for e in runtime.run(session_id, Message.user("list"), context)]

    assert (
        provider.requests[1]
        .messages[-1]
        .text.endswith(f"[output cut at {MAX_TOOL_OUTPUT} characters]")
    )
    assert await store.tool_output(session_id, "c1") is None
