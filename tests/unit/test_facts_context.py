"""Remembered facts reach the model on later turns, after the stable system prompt."""

from __future__ import annotations

from pathlib import Path

from core.backends.sql.store import SqlStore, sqlite_url
from core.facts import memory_block, memory_scope
from core.messages import Message, ToolCall
from core.modes import SAFE_CHAT
from core.providers import ScriptedProvider, text_reply, tool_reply
from core.redact import Redactor
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolRegistry
from core.tools.facts import memory_tools


async def test_a_fact_remembered_in_one_turn_is_context_in_the_next(tmp_path: Path) -> None:
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"))
    session = await store.create_session("telegram:1:555")
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name="remember", arguments={"text": "My dog is Rex"})),
            text_reply("Noted."),
            text_reply("Your dog is Rex."),
        ]
    )

    async def relevant(context: ChannelContext, asked: str) -> str:
        return await memory_block(store, memory_scope("default", "telegram", "42"), asked)

    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry(memory_tools(store, "default", Redactor())),
        store=store,
        turn_context=relevant,
    )
    context = ChannelContext(platform="telegram", mode=SAFE_CHAT, user_id="42")

    async for _ in runtime.run(session.id, Message.user("remember my dog is Rex"), context):
        pass
    async for _ in runtime.run(session.id, Message.user("what is my dog's name?"), context):
        pass

    first, _, last = provider.requests
    assert first.turn_context == ""  # nothing remembered yet
    assert "Relevant context from memory" in last.turn_context
    assert "My dog is Rex" in last.turn_context
    assert "Rex" not in last.system  # the cached prompt prefix does not change
    assert first.system == last.system
    await store.close()


async def test_a_failing_context_lookup_does_not_fail_the_turn(tmp_path: Path) -> None:
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"))
    session = await store.create_session("terminal:local:x")
    provider = ScriptedProvider([text_reply("still here")])

    async def broken(context: ChannelContext, asked: str) -> str:
        raise RuntimeError("memory is down")

    runtime = AgentRuntime(
        provider=provider, model="m", tools=ToolRegistry(), store=store, turn_context=broken
    )
    events = [
        e
        async for e in runtime.run(
            session.id, Message.user("hi"), ChannelContext(platform="terminal", mode=SAFE_CHAT)
        )
    ]

    assert events[-1].kind == "run_completed"
    assert provider.requests[0].turn_context == ""
    await store.close()
