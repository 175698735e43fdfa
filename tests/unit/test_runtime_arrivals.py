"""The runtime's hook for messages that come while a turn runs (`AgentRuntime.run(arrivals=)`):
asked before every model call, each message stored and marked processed before it is handed
back to be taken out of its mailbox, and announced with `Joined`.

Real `SqlStore` (SQLite) and a scripted provider; the `Arrivals` is a list kept here.
"""

from __future__ import annotations

from core.arrivals import Arrival
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.events import Joined
from core.messages import ImagePart, Message, ToolCall
from core.providers.scripted import ScriptedProvider, text_reply, tool_reply
from core.runtime import AgentRuntime
from core.tools import ToolRegistry, builtin_tools
from tests.integration.helpers import CONTEXT, completed, of_type

CHAT = Address(platform="terminal", chat="it")


class Waiting:
    """Gives what `arrive` holds at the next call; notes what each call and hand-back saw."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.steps: list[int] = []
        self.arrive: list[Arrival] = []
        # (message id, whether it was stored and marked when handed back)
        self.handed_back: list[tuple[str, bool]] = []

    async def joining(self, step: int) -> list[Arrival]:
        self.steps.append(step)
        found, self.arrive = self.arrive, []
        return found

    async def answer(self, user_id: str) -> Arrival | None:
        return None

    async def joined(self, arrival: Arrival) -> None:
        marked = await self.store.is_processed(arrival.inbound.dedupe_key)
        self.handed_back.append((arrival.inbound.id, marked))


def arrival(text: str) -> Arrival:
    inbound = Inbound(address=CHAT, user_id="u1", text=text, is_direct=True)
    return Arrival(inbound, Message.user(text, source="head").model_copy(update={"id": text}))


async def test_messages_join_before_the_next_call_stored_and_marked_first(
    store: SqlStore,
) -> None:
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="c1", name="current_time", arguments={})),
            text_reply("covered both"),
        ]
    )
    runtime = AgentRuntime(
        provider=provider, model="m", tools=ToolRegistry(builtin_tools()), store=store
    )
    waiting = Waiting(store)
    late = arrival("and also this")

    async def on_first_call(step: int) -> list[Arrival]:
        if step == 2:
            waiting.arrive = [late]
        return await Waiting.joining(waiting, step)

    waiting.joining = on_first_call  # type: ignore[method-assign]
    events = [
        e
        async for e in runtime.run(
            "s1", Message.user("first", source="head"), CONTEXT, arrivals=waiting
        )
    ]

    assert completed(events).text == "covered both"
    assert waiting.steps == [1, 2]
    assert waiting.handed_back == [(late.inbound.id, True)]
    (joined,) = of_type(events, Joined)
    assert (joined.inbound_id, joined.text) == (late.inbound.id, "and also this")
    # The second call saw it after the tool's result; it is stored once, in that place.
    assert provider.requests[1].messages[-1].text == "and also this"
    stored = await store.list_messages("s1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
    assert await store.is_processed(late.inbound.dedupe_key)


async def test_without_arrivals_a_turn_runs_as_before(store: SqlStore) -> None:
    provider = ScriptedProvider([text_reply("hi")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    events = [e async for e in runtime.run("s1", Message.user("hello"), CONTEXT)]
    assert completed(events).text == "hi"
    assert of_type(events, Joined) == []


async def test_a_joined_message_s_image_goes_to_the_next_call_with_its_bytes(
    store: SqlStore,
) -> None:
    # The store gives a joined message back with its image as a reference; the turn reads
    # the bytes back, so the model sees the picture, not "no longer kept".
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    provider = ScriptedProvider(
        [tool_reply(ToolCall(id="c1", name="current_time", arguments={})), text_reply("seen")]
    )
    runtime = AgentRuntime(
        provider=provider, model="m", tools=ToolRegistry(builtin_tools()), store=store
    )
    waiting = Waiting(store)
    photo = Message.user("this too", [ImagePart(media_type="image/png", data=png)])
    inbound = Inbound(address=CHAT, user_id="u1", text="this too", is_direct=True)
    late = Arrival(inbound, photo.model_copy(update={"source": "head", "id": "photo"}))

    async def on_second_call(step: int) -> list[Arrival]:
        if step == 2:
            waiting.arrive = [late]
        return await Waiting.joining(waiting, step)

    waiting.joining = on_second_call  # type: ignore[method-assign]
    events = [
        e
        async for e in runtime.run(
            "s1", Message.user("first", source="head"), CONTEXT, arrivals=waiting
        )
    ]

    assert completed(events).text == "seen"
    [sent] = provider.requests[1].messages[-1].images
    assert sent.data == png
