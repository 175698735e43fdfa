"""Extensions through the real runtime: a scripted model, the real SQLite store.

The person's text replaced (the model and the store see the new one) or answered without a
model call; the system prompt replaced; the messages of a request replaced (the request
differs, the store does not); an abort ends the turn as a stop does; a compaction requested
compacts the session, before the next call or after the turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bots.profiles import load_profile
from bots.providers import build_provider
from bots.settings import Settings
from core.arrivals import Arrival
from core.backends.sql.store import SqlStore
from core.compaction import Compactor
from core.confirm import Confirmations
from core.envelopes import Address, Inbound
from core.errors import ConfigError
from core.events import (
    AgentEvent,
    Cancelled,
    Compacted,
    Finished,
    ModelEvent,
    RunCompleted,
    RunFailed,
)
from core.extensions import EXTENSION_FAILED, load_extensions
from core.messages import Message, ToolCall, Usage
from core.modes import FULL
from core.providers.scripted import ScriptedProvider, text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolRegistry
from core.tools.ask_user import ASK_USER, ask_user_tool
from tests.backends.memory_bus import MemoryBus
from tests.extension_modules import extensions as ext
from tests.fakes import FakeOpenAI, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.workers import Outbox, build_worker, hand_in

E = "tests.extension_modules.extensions"
PATIENCE = 5.0
DM = Address(platform="telegram", bot="b", chat="42")
CONTEXT = ChannelContext(
    platform="telegram",
    mode=FULL,
    session_key="telegram:b:42",
    user_id="u7",
    address=DM,
    is_direct=True,
)


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    ext.SEEN.clear()
    ext.USAGE.clear()
    yield
    ext.SEEN.clear()
    ext.USAGE.clear()


async def run(
    store: SqlStore,
    session_id: str,
    provider: ScriptedProvider,
    text: str = "hello there",
    compactor: Compactor | None = None,
    **points: Any,
) -> list[AgentEvent]:
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        compactor=compactor,
        extensions=load_extensions(**points),
    )
    return [e async for e in runtime.run(session_id, Message.user(text), CONTEXT)]


async def stored(store: SqlStore, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in await store.list_messages(session_id)]


async def test_the_model_and_the_store_see_the_replaced_input(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([text_reply("Ahoy.")])
    events = await run(store, session_id, provider, input=f"{E}:shout")

    assert isinstance(events[-1], RunCompleted)
    assert provider.requests[0].messages[-1].text == "HELLO THERE"
    assert await stored(store, session_id) == [("user", "HELLO THERE"), ("assistant", "Ahoy.")]


async def test_an_input_extension_answers_without_a_model_call(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([])
    events = await run(store, session_id, provider, "ping", input=f"{E}:answer_ping")

    final = events[-1]
    assert isinstance(final, RunCompleted) and final.text == "pong (from an extension)"
    assert provider.requests == []
    assert await stored(store, session_id) == [
        ("user", "ping"),
        ("assistant", "pong (from an extension)"),
    ]


async def test_the_system_prompt_is_replaced_and_extended_for_the_turn(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([text_reply("Arr.")])
    await run(store, session_id, provider, before_agent_start=[f"{E}:pirate", f"{E}:sign_off"])
    assert provider.requests[0].system == (
        "You are a pirate.\n\nSign every answer with -- the bot."
    )


async def test_context_replaces_the_request_messages_not_the_stored_ones(
    store: SqlStore, session_id: str
) -> None:
    await store.append_message(session_id, Message.user("earlier question"))
    await store.append_message(session_id, Message.assistant("earlier answer"))
    asks_a_tool: list[ModelEvent] = [
        ToolCall(id="c1", name="missing_tool"),
        Finished(stop_reason="tool_use", usage=Usage(input_tokens=11)),
    ]
    provider = ScriptedProvider([asks_a_tool, text_reply("Done.")])
    events = await run(store, session_id, provider, context=f"{E}:last_message_only")

    assert isinstance(events[-1], RunCompleted)
    first, second = provider.requests
    assert [m.text for m in first.messages] == ["(2 earlier messages left out) hello there"]
    assert len(second.messages) == 1
    assert second.messages[0].text.startswith("(4 earlier messages left out)")
    kept = await stored(store, session_id)
    assert kept[:3] == [
        ("user", "earlier question"),
        ("assistant", "earlier answer"),
        ("user", "hello there"),
    ]
    assert [role for role, _ in kept[3:]] == ["assistant", "tool", "assistant"]
    # The context saw the turn's usage so far: nothing before the first call.
    assert ext.USAGE == [0, 11]


async def test_an_abort_ends_the_turn_before_the_model_is_asked(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([])
    events = await run(store, session_id, provider, before_agent_start=f"{E}:abort_turn")

    assert isinstance(events[-1], Cancelled)
    assert provider.requests == []


async def test_a_failing_extension_ends_the_turn_with_one_clear_message(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([])
    events = await run(store, session_id, provider, context=f"{E}:raises")

    final = events[-1]
    assert isinstance(final, RunFailed) and final.message == EXTENSION_FAILED
    assert provider.requests == []


async def fill(store: SqlStore, session_id: str, pairs: int) -> None:
    for n in range(pairs):
        await store.append_message(session_id, Message.user(f"question {n}"))
        await store.append_message(session_id, Message.assistant(f"answer {n}"))


async def test_a_compaction_requested_on_input_compacts_before_the_first_call(
    store: SqlStore, session_id: str
) -> None:
    await fill(store, session_id, 6)
    summarizer = ScriptedProvider([text_reply("They asked six questions.")])
    compactor = Compactor(summarizer, "tiny", keep_last=2)
    provider = ScriptedProvider([text_reply("Seventh answer.")])
    events = await run(store, session_id, provider, compactor=compactor, input=f"{E}:compact_first")

    assert isinstance(events[-1], RunCompleted)
    [compacted] = [e for e in events if isinstance(e, Compacted)]
    # Everything before the last user message ahead of the `keep_last` newest.
    assert compacted.summarized_messages == 10
    summary = await store.latest_summary(session_id)
    assert summary is not None and summary.text == "They asked six questions."
    sent = provider.requests[0].messages
    assert "They asked six questions." in sent[0].text
    assert [m.text for m in sent[2:]] == ["question 5", "answer 5", "hello there"]
    assert len(await store.list_messages(session_id)) == 14  # the store keeps every message


async def test_a_compaction_requested_on_the_last_call_compacts_after_the_turn(
    store: SqlStore, session_id: str
) -> None:
    await fill(store, session_id, 3)
    summarizer = ScriptedProvider([text_reply("Three questions.")])
    compactor = Compactor(summarizer, "tiny", keep_last=2)
    provider = ScriptedProvider([text_reply("Fourth answer.")])
    events = await run(
        store, session_id, provider, compactor=compactor, context=f"{E}:compact_after"
    )

    assert len(provider.requests[0].messages) == 7  # the call itself went out whole
    kinds = [type(e) for e in events]
    assert kinds.index(Compacted) < kinds.index(RunCompleted)
    summary = await store.latest_summary(session_id)
    assert summary is not None and summary.text == "Three questions."


# From a profile on disk, through the worker and the (fake) OpenAI API

PROFILE = f"""
provider = "openai"
model = "gpt-4o-mini"

[hooks]
input = ["{E}:answer_ping", "{E}:shout"]
before_agent_start = [{{ call = "{E}:sign_off", fail = "open" }}]
"""


async def test_a_profile_s_extensions_shape_what_the_model_api_receives(
    fake_openai: FakeOpenAI, store: SqlStore, tmp_path: Path
) -> None:
    folder = tmp_path / "profiles" / "extended"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "profiles", "extended")
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )
    provider, resolved = build_provider(settings, profile)
    runtime = AgentRuntime(
        provider=provider,
        model=resolved.model,
        tools=ToolRegistry([]),
        store=store,
        extensions=profile.settings.hooks.extensions(),
    )
    bus = MemoryBus()
    worker = build_worker(bus=bus, store=store, runtime=runtime)
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    fake_openai.script(Text("Loud and clear."))
    try:
        ping = Inbound(address=DM, user_id="u1", text="ping", is_direct=True)
        await hand_in(worker, ping)
        assert (await outbox.turn_of(ping))[-1].text == "pong (from an extension)"
        hello = Inbound(address=DM, user_id="u1", text="hello", is_direct=True)
        await hand_in(worker, hello)
        assert (await outbox.turn_of(hello))[-1].text == "Loud and clear."
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await provider.aclose()
        await bus.close()

    [request] = fake_openai.requests  # "ping" was answered without a call
    sent: list[dict[str, Any]] = request.json["messages"]
    assert sent[0]["role"] == "system"
    assert sent[0]["content"].endswith("Sign every answer with -- the bot.")
    assert [m["content"] for m in sent[1:]] == [
        "ping",
        "pong (from an extension)",
        "HELLO",
    ]


def test_a_profile_naming_an_extension_that_does_not_fit_stops_the_load(tmp_path: Path) -> None:
    folder = tmp_path / "profiles" / "bad"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(
        f'[hooks]\ncontext = "{E}:one_argument"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        load_profile(tmp_path / "profiles", "bad")
    message = str(caught.value)
    assert message.startswith(f"{folder / 'profile.toml'}: [hooks] context: ")
    assert "must take 2 arguments (the event, the context)" in message


class Arriving:
    """`Arrivals` that hand their messages to the turn before its first model call."""

    def __init__(self, *texts: str) -> None:
        self.waiting = [
            Arrival(
                Inbound(address=DM, user_id="u7", text=text, is_direct=True),
                Message.user(text).model_copy(update={"id": text}),
            )
            for text in texts
        ]
        self.taken_out: list[str] = []

    async def joining(self, step: int) -> list[Arrival]:
        found, self.waiting = self.waiting, []
        return found

    async def answer(self, user_id: str) -> Arrival | None:
        return None

    async def joined(self, arrival: Arrival) -> None:
        self.taken_out.append(arrival.inbound.text)


class Answering(Arriving):
    """`Arrivals` where nothing joins and `text` waits as the asker's answer to `ask_user`."""

    def __init__(self, text: str) -> None:
        super().__init__()
        inbound = Inbound(address=DM, user_id="u7", user_name="Ann", text=text, is_direct=True)
        self.reply: Arrival | None = Arrival(inbound, Message.user(text))

    async def answer(self, user_id: str) -> Arrival | None:
        found, self.reply = self.reply, None
        return found


async def test_an_ask_user_answer_passes_through_input_too(
    store: SqlStore, session_id: str
) -> None:
    """It is the person's message, read as the tool's result: the `input` extensions see it."""
    question = ToolCall(id="a1", name=ASK_USER, arguments={"question": "Which colour?"})
    provider = ScriptedProvider([tool_reply(question), text_reply("Blue it is.")])
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([ask_user_tool(Confirmations(bus=MemoryBus()), timeout=5.0)]),
        store=store,
        extensions=load_extensions(input=[f"{E}:shout"]),
    )
    arrivals = Answering("blue")
    [_ async for _ in runtime.run(session_id, Message.user("logo"), CONTEXT, arrivals=arrivals)]

    assert provider.requests[1].messages[-1].text == "Ann answered: BLUE"
    assert arrivals.taken_out == ["blue"]
    assert arrivals.reply is None


async def test_a_message_that_joins_the_turn_passes_through_input_too(
    store: SqlStore, session_id: str
) -> None:
    provider = ScriptedProvider([text_reply("Both heard.")])
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        extensions=load_extensions(input=[f"{E}:answer_ping", f"{E}:shout"]),
    )
    arrivals = Arriving("ping", "and more")
    events = [
        e async for e in runtime.run(session_id, Message.user("first"), CONTEXT, arrivals=arrivals)
    ]

    assert isinstance(events[-1], RunCompleted) and events[-1].text == "Both heard."
    # An answer cannot end a turn already running: "ping" joins as it is.
    assert [m.text for m in provider.requests[0].messages] == ["FIRST", "ping", "AND MORE"]
    assert arrivals.taken_out == ["ping", "and more"]
    assert await stored(store, session_id) == [
        ("user", "FIRST"),
        ("user", "ping"),
        ("user", "AND MORE"),
        ("assistant", "Both heard."),
    ]
