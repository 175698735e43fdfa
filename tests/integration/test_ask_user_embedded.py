"""The `ask_user` tool in the embedded deployment: the SQLite bus, mailboxes and store.

The answer goes into the session's mailbox (a SQLite file) behind the turn's message; the
waiting turn, which holds that mailbox's claim, finds it there, marks it processed and takes
it out: it is stored once (as the tool's result), never joined as a person's message, never a
turn. The same with `busy = "queue"`, where no message joins a running turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.backends import Backends
from core.backends.sql import open_embedded
from core.backends.sql.store import sqlite_url
from core.confirm import Confirmations
from core.envelopes import Address, Inbound
from core.messages import ToolCall
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.tools.ask_user import ASK_USER, ask_user_tool
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
TERMINAL = Address(platform="terminal", chat="alice")
QUESTION = "Which colour should the logo be?"


@pytest.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[Backends]:
    async with open_embedded(
        sqlite_url(tmp_path / "switchboard.db"), tmp_path / "queues.db", lease_seconds=30
    ) as found:
        yield found


def said(text: str) -> Inbound:
    return Inbound(address=TERMINAL, user_id="u1", user_name="Alice", text=text, is_direct=True)


@pytest.mark.parametrize("busy", ["steer", "queue"])
async def test_the_answer_is_stored_once_and_its_mailbox_copy_taken_out(
    embedded: Backends, busy: str
) -> None:
    store = embedded.store
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name=ASK_USER, arguments={"question": QUESTION})),
            text_reply("A blue logo it is."),
        ]
    )
    gate = Confirmations(bus=embedded.bus, timeout=PATIENCE, marks=store)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([ask_user_tool(gate, timeout=PATIENCE)]),
        store=store,
        confirm=gate.confirm,
    )
    worker = build_worker(
        bus=embedded.bus,
        store=store,
        runtime=runtime,
        mailboxes=embedded.mailboxes,
        confirmations=gate,
        policy=ChannelPolicy(modes={"terminal": "safe-chat"}),
        busy=busy,
    )
    outbox = Outbox(embedded.bus)
    task = asyncio.create_task(worker.run())
    try:
        await hand_in(worker, said("make me a logo"))
        await outbox.until(QUESTION, "question")
        await hand_in(worker, said("Blue"))
        await outbox.until("A blue logo it is.", "reply")
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)
        assert await embedded.mailboxes.pending() == []
        session = await store.current_session(TERMINAL.session_key)
        messages = await store.list_messages(session.id)
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    assert len(provider.requests) == 2
    assert [m.text for m in messages if m.role == "user"] == ["make me a logo"]
    assert [m.text for m in messages if m.role == "tool"] == ["Alice answered: Blue"]
