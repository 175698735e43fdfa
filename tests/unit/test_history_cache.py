"""HistoryCache: a cached history is reused only while it is exactly the store's log."""

from __future__ import annotations

from core.context import Sanitizer
from core.history import HistoryCache
from core.messages import Message, ToolCall
from core.providers.scripted import ScriptedProvider, text_reply
from core.runtime import AgentRuntime
from core.store import Store
from core.store.people import TOMBSTONE, Person
from core.tools import ToolRegistry
from tests.integration.helpers import completed, run_turn


class CountingStore:
    """The real SQLite store, counting how many messages each read returned."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.read: list[int] = []

    async def list_messages(self, session_id: str, *, after_seq: int = 0) -> list[Message]:
        found = await self.inner.list_messages(session_id, after_seq=after_seq)
        self.read.append(len(found))
        return found


async def load(
    cache: HistoryCache, store: CountingStore, session_id: str, *, after_seq: int
) -> tuple[list[Message], Sanitizer | None]:
    """The session's messages after the summary marker `after_seq`, as a turn opening puts
    them together: the store read after what the cache holds, joined to it, read again when
    what is held is of no use."""
    read_after = max(cache.known(session_id), after_seq)
    newer = await store.list_messages(session_id, after_seq=read_after)
    joined = cache.join(session_id, after_seq, newer, read_after=read_after)
    if joined is None:
        return await store.list_messages(session_id, after_seq=after_seq), None
    return joined


async def _append(store: Store, session_id: str, *texts: str) -> list[Message]:
    return [await store.append_message(session_id, Message.user(t)) for t in texts]


async def test_a_kept_history_is_reused_and_only_newer_messages_are_read(store: Store) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    await _append(store, session, "one", "two", "three")

    first, _ = await load(cache, counting, session, after_seq=0)
    cache.keep(session, first, after_seq=0)
    # Another process adds a message: the next load reads just that one.
    await _append(store, session, "four")
    second, _ = await load(cache, counting, session, after_seq=0)

    assert [m.text for m in second] == ["one", "two", "three", "four"]
    assert counting.read == [3, 1]
    assert second[0] is first[0]
    assert second == await store.list_messages(session)


async def test_a_history_with_a_gap_is_not_kept(store: Store) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    stored = await _append(store, session, "one", "two", "three")

    # A turn cut off between a write and its bookkeeping holds seqs 1 and 3, not 2.
    cache.keep(session, [stored[0], stored[2]], after_seq=0)
    again, _ = await load(cache, counting, session, after_seq=0)

    assert [m.seq for m in again] == [1, 2, 3]
    assert counting.read == [3]
    assert cache.held == 0


async def test_messages_out_of_seq_order_are_kept_in_seq_order(store: Store) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    stored = await _append(store, session, "one", "two")

    cache.keep(session, [stored[1], stored[0]], after_seq=0)
    again, _ = await load(cache, counting, session, after_seq=0)

    assert [m.seq for m in again] == [1, 2]
    assert counting.read == [0]


async def test_a_newer_summary_marker_cuts_the_front_and_an_older_one_reloads(
    store: Store,
) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    stored = await _append(store, session, "one", "two", "three", "four")

    cache.keep(session, stored[1:], after_seq=1)
    # Compaction summarized up to seq 2: the cache serves 3 and 4 without reading them.
    cut, _ = await load(cache, counting, session, after_seq=2)
    assert [m.seq for m in cut] == [3, 4]
    cache.keep(session, cut, after_seq=2)
    # A request from before that summary (seq 0) cannot be served from the cache.
    whole, _ = await load(cache, counting, session, after_seq=0)

    assert [m.seq for m in whole] == [1, 2, 3, 4]
    # The second load's first read (after the cache) is of no use: everything is read again.
    assert counting.read == [0, 0, 4]


async def test_the_least_recently_used_sessions_are_dropped_over_the_bound(store: Store) -> None:
    cache = HistoryCache(max_messages=5)
    sessions = [(await store.create_session(f"s{i}")).id for i in range(3)]
    for session in sessions:
        cache.keep(session, await _append(store, session, "a", "b"), after_seq=0)

    assert cache.held == 4  # the first session's two went to make room
    counting = CountingStore(store)
    await load(cache, counting, sessions[0], after_seq=0)
    await load(cache, counting, sessions[2], after_seq=0)
    assert counting.read == [2, 0]


def test_derived_values_are_computed_once_and_not_carried_into_changed_copies() -> None:
    calls: list[str] = []

    def measure(message: Message) -> int:
        calls.append(message.text)
        return len(message.text)

    message = Message.assistant("hello", [ToolCall(id="c1", name="calculator", arguments={})])
    assert message.derived("size", measure) == 5
    assert message.derived("size", measure) == 5
    changed = message.model_copy(update={"content": []})

    assert changed.derived("size", measure) == 0
    assert calls == ["hello", ""]
    # What was derived is no field: equality, dumps and validation do not see it.
    assert message == Message.assistant(
        "hello", [ToolCall(id="c1", name="calculator", arguments={})]
    )
    assert "_derived" not in message.model_dump()
    assert Message.model_validate_json(message.model_dump_json()) == message


async def test_what_was_read_after_another_seq_than_the_held_messages_is_not_joined(
    store: Store,
) -> None:
    session = (await store.create_session("s")).id
    cache = HistoryCache()
    stored = await _append(store, session, "one", "two", "three")
    cache.keep(session, stored[:2], after_seq=0)
    assert cache.known(session) == 2

    # Read after seq 1 (not after the held seq 2): the caller has to read again.
    newer = await store.list_messages(session, after_seq=1)
    assert cache.join(session, 0, newer, read_after=1) is None
    # Nothing held for a session: what was read after its marker is the history.
    assert cache.known(session) == 0
    assert cache.join(session, 0, stored, read_after=0) == (stored, None)


async def test_a_history_rewritten_in_place_is_read_again_by_a_process_holding_it(
    store: Store,
) -> None:
    """Erasing a person rewrites a group's messages in place (tombstones): a runtime that
    held the group's history sends the model the tombstones on its next turn, not the words."""
    provider = ScriptedProvider([text_reply("hi all"), text_reply("sure")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    group = "g1"
    ann = Message.user("my secret plan is xylophonewombat", author="telegram:42")
    completed(await run_turn(runtime, group, ann))

    erased = await store.erase_person(Person(platform="telegram", user_id="42"))
    assert erased.messages_tombstoned == 2  # Ann's message and the answer to it
    session = await store.get_session(group)
    assert session is not None and session.revision == 1

    completed(await run_turn(runtime, group, Message.user("bob here", author="telegram:7")))
    sent = [m.text for m in provider.requests[1].messages]
    assert not any("xylophonewombat" in text for text in sent), sent
    assert TOMBSTONE in sent


async def test_a_held_history_of_another_revision_is_not_joined(store: Store) -> None:
    session = (await store.create_session("s")).id
    cache = HistoryCache()
    held = await _append(store, session, "one")
    cache.keep(session, held, after_seq=0, revision=0)
    assert cache.join(session, 0, [], read_after=1, revision=1) is None
    cache.keep(session, held, after_seq=0, revision=1)
    assert cache.join(session, 0, [], read_after=1, revision=1) == (held, None)
