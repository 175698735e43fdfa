"""`/compact` through the worker's command path, on SQLite and PostgreSQL: the chat's older
messages are summarized now by the runtime's compactor, the reply says how many messages the
model reads before and after, the next turn's request starts from the summary, and the store
keeps every message. A short chat has nothing to compact; a bot without a compactor says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.compaction import Compactor
from core.envelopes import Address, Inbound
from core.messages import Message, Usage
from core.model_choice import ModelChoices, ModelOption
from core.providers.scripted import ScriptedProvider, text_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")


@pytest.fixture(params=["sqlite", "postgresql"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """An empty store of each SQL backend (PostgreSQL: the suite's test server)."""
    if request.param == "postgresql":
        url = await request.getfixturevalue("postgres_server").new_database()
    else:
        url = sqlite_url(tmp_path / "switchboard.db")
    store = await SqlStore.open(url)
    try:
        yield store
    finally:
        await store.close()


async def start(
    store: SqlStore, model: ScriptedProvider, compactor: Compactor | None, **options: Any
) -> tuple[Worker, Outbox, MemoryBus, asyncio.Task[None]]:
    runtime = AgentRuntime(
        provider=model,
        model="m",
        tools=ToolRegistry([]),
        store=store,
        compactor=compactor,
        **options,
    )
    bus = MemoryBus()
    worker = build_worker(bus=bus, store=store, runtime=runtime)
    return worker, Outbox(bus, "telegram"), bus, asyncio.create_task(worker.run())


async def stop(worker: Worker, bus: MemoryBus, task: asyncio.Task[None]) -> None:
    await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
    await asyncio.wait_for(task, PATIENCE)
    await bus.close()


async def say(worker: Worker, outbox: Outbox, text: str) -> str:
    """Send `text` (a command when it starts with a slash); the text that ends its turn."""
    if text.startswith("/"):
        inbound = Inbound(
            address=DM, user_id="u1", text=text, kind="command", command=text[1:], is_direct=True
        )
    else:
        inbound = Inbound(address=DM, user_id="u1", text=text, is_direct=True)
    await hand_in(worker, inbound)
    return (await outbox.turn_of(inbound))[-1].text


async def test_compact_summarizes_the_chat_now_and_the_next_turn_starts_from_it(
    any_store: SqlStore,
) -> None:
    session = await any_store.current_session(DM.session_key)
    for n in range(5):
        await any_store.append_message(session.id, Message.user(f"question {n}"))
        await any_store.append_message(session.id, Message.assistant(f"answer {n}"))
    summarizer = ScriptedProvider([text_reply("Five questions, five answers.")])
    model = ScriptedProvider([text_reply("Sixth answer.")])
    worker, outbox, bus, task = await start(
        any_store, model, Compactor(summarizer, "tiny", keep_last=2)
    )
    try:
        reply = await say(worker, outbox, "/compact")
        assert reply == (
            "Compacted this conversation: 8 older messages summarized; "
            "the model now reads 4 messages instead of 10."
        )
        assert model.requests == []  # no turn: only the summarizing call
        assert len(summarizer.requests) == 1
        summary = await any_store.latest_summary(session.id)
        assert summary is not None and summary.text == "Five questions, five answers."

        assert await say(worker, outbox, "question 5") == "Sixth answer."
        sent = [m.text for m in model.requests[0].messages]
        assert "Five questions, five answers." in sent[0]
        assert sent[2:] == ["question 4", "answer 4", "question 5"]
        assert len(await any_store.list_messages(session.id)) == 12
    finally:
        await stop(worker, bus, task)


async def test_a_short_chat_has_nothing_to_compact_and_no_compactor_says_so(
    store: SqlStore,
) -> None:
    summarizer = ScriptedProvider([])
    worker, outbox, bus, task = await start(
        store, ScriptedProvider([]), Compactor(summarizer, "tiny", keep_last=8)
    )
    try:
        assert await say(worker, outbox, "/compact") == (
            "Nothing to compact: this conversation's 0 recent messages are kept as they are."
        )
        assert summarizer.requests == []
    finally:
        await stop(worker, bus, task)

    worker, outbox, bus, task = await start(store, ScriptedProvider([]), None)
    try:
        assert await say(worker, outbox, "/compact") == "Compacting is not set up for this bot."
    finally:
        await stop(worker, bus, task)


async def test_compact_runs_on_the_chats_model_and_is_charged_to_its_session(
    any_store: SqlStore,
) -> None:
    session = await any_store.current_session(DM.session_key)
    for n in range(5):
        await any_store.append_message(session.id, Message.user(f"question {n}"))
        await any_store.append_message(session.id, Message.assistant(f"answer {n}"))
    assert await any_store.set_session_model(session.id, "chosen")
    model = ScriptedProvider([text_reply("Summary.", usage=Usage(input_tokens=100))])
    choices = ModelChoices(
        default_provider=model,
        default_model="m",
        allowed=(ModelOption(provider="scripted", model="chosen"),),
        providers={"scripted": model},
    )
    worker, outbox, bus, task = await start(
        any_store,
        model,
        Compactor(ScriptedProvider([]), "tiny", keep_last=2),
        models=choices,
        cost=lambda name, usage: usage.input_tokens / 1000 if name == "chosen" else None,
    )
    try:
        assert (await say(worker, outbox, "/compact")).startswith("Compacted this conversation")
    finally:
        await stop(worker, bus, task)

    assert [r.model for r in model.requests] == ["chosen"]
    (entry,) = await any_store.cost_entries(session.id)
    assert (entry.model, entry.cost_usd, entry.usage.input_tokens) == ("chosen", 0.1, 100)
    assert (entry.user, entry.chat) == ("telegram:u1", "telegram:b:42")
    assert (await any_store.cost_summary(session.id)).cost_usd == 0.1
