"""`/fork`, `/sessions` and `/switch` through the worker, with the bot's own command registry
and the real OpenAI client against the fake API: a fork's next request holds the history it
was copied from, switching back continues the original without the fork's turns, and another
chat's session is never reached."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bots.platforms import command_registry
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.providers.openai import OpenAIProvider
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.fakes import FakeOpenAI, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
GROUP = Address(platform="telegram", bot="b", chat="-100")


@pytest.fixture
async def bot(fake_openai: FakeOpenAI, store: SqlStore) -> AsyncIterator[tuple[Worker, Outbox]]:
    provider = OpenAIProvider(api_key=TEST_API_KEY, base_url=fake_openai.url)
    runtime = AgentRuntime(
        provider=provider, model="gpt-4o-mini", tools=ToolRegistry([]), store=store
    )
    bus = MemoryBus()
    worker = build_worker(bus=bus, store=store, runtime=runtime, commands=command_registry())
    task = asyncio.create_task(worker.run())
    try:
        yield worker, Outbox(bus, "telegram")
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()


async def say(worker: Worker, outbox: Outbox, text: str, *, chat: Address = DM) -> str:
    """Send `text` (a command when it starts with a slash); the text of what ends its turn."""
    direct = chat == DM
    if text.startswith("/"):
        inbound = Inbound(
            address=chat,
            user_id="u1",
            text=text,
            kind="command",
            command=text[1:].split()[0],
            is_direct=direct,
        )
    else:
        inbound = Inbound(
            address=chat, user_id="u1", text=text, is_direct=direct, mentions_bot=True
        )
    await hand_in(worker, inbound)
    sent = await outbox.turn_of(inbound)
    return sent[-1].text


def said(request: Any) -> list[str]:
    """The texts of a chat completion request's messages, the system prompt left out."""
    texts = []
    for message in request.json["messages"]:
        if message["role"] == "system":
            continue
        content = message["content"]
        if not isinstance(content, str):
            content = " ".join(part.get("text", "") for part in content)
        texts.append(content)
    return texts


async def test_a_fork_continues_the_history_and_switching_back_leaves_it_out(
    bot: tuple[Worker, Outbox], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, outbox = bot
    fake_openai.script(Text("one"), Text("two"), Text("three"), Text("four"))
    assert await say(worker, outbox, "hello otters") == "one"
    original = await store.find_current_session(DM.session_key)
    assert original is not None

    forked = await say(worker, outbox, "/fork beavers")
    assert forked.startswith("Forked this conversation (2 messages) into ")
    assert f"/switch {original.id} goes back" in forked
    assert await say(worker, outbox, "now beavers") == "two"
    assert said(fake_openai.requests[1]) == ["hello otters", "one", "now beavers"]

    listing = await say(worker, outbox, "/sessions")
    lines = listing.splitlines()
    assert lines[0] == "Conversations of this chat (/switch ID or NAME):"
    assert '"beavers"' in lines[1] and "4 messages" in lines[1] and "(current)" in lines[1]
    assert lines[2].startswith(f"{original.id}: started ") and "2 messages" in lines[2]
    assert "(current)" not in lines[2]

    switched = await say(worker, outbox, f"/switch {original.id}")
    assert switched == f"Switched to {original.id} (2 messages); your next message continues it."
    assert await say(worker, outbox, "back to otters") == "three"
    assert said(fake_openai.requests[2]) == ["hello otters", "one", "back to otters"]

    assert (await say(worker, outbox, "/switch BEAVERS")).startswith("Switched to ")
    assert await say(worker, outbox, "beavers again") == "four"
    assert said(fake_openai.requests[3]) == [
        "hello otters",
        "one",
        "now beavers",
        "two",
        "beavers again",
    ]


async def test_only_this_chats_sessions_are_reached(
    bot: tuple[Worker, Outbox], fake_openai: FakeOpenAI, store: SqlStore
) -> None:
    worker, outbox = bot
    fake_openai.script(Text("group answer"), Text("dm answer"))
    assert await say(worker, outbox, "hi all", chat=GROUP) == "group answer"
    group = await store.find_current_session(GROUP.session_key)
    assert group is not None

    assert (
        await say(worker, outbox, "/fork")
        == "There is no conversation here to fork yet: just write."
    )
    assert await say(worker, outbox, "hi me") == "dm answer"
    refused = await say(worker, outbox, f"/switch {group.id}")
    assert refused == f"This chat has no conversation {group.id!r}; /sessions lists them."
    assert group.id not in await say(worker, outbox, "/sessions")
    current = await store.find_current_session(GROUP.session_key)
    assert current is not None and current.id == group.id
    assert "one word" in await say(worker, outbox, "/fork two words")
    assert "one word" in await say(worker, outbox, "/fork 9lives")
    await say(worker, outbox, "/fork mine")
    assert "already" in await say(worker, outbox, "/fork Mine")
