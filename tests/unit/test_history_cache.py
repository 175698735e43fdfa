"""HistoryCache: a cached history is reused only while it is exactly the store's log."""

from __future__ import annotations

from core.history import HistoryCache
from core.messages import Message, ToolCall
from core.store import Store
from core.store.log import CompactionSummary


class CountingStore:
    """The real SQLite store, counting how many messages each read returned."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.read: list[int] = []

    async def latest_summary(self, session_id: str) -> CompactionSummary | None:
        return await self.inner.latest_summary(session_id)

    async def list_messages(self, session_id: str, *, after_seq: int = 0) -> list[Message]:
        found = await self.inner.list_messages(session_id, after_seq=after_seq)
        self.read.append(len(found))
        return found

    async def summary_and_tail(
        self, session_id: str
    ) -> tuple[CompactionSummary | None, list[Message]]:
        summary, found = await self.inner.summary_and_tail(session_id)
        self.read.append(len(found))
        return summary, found


async def _append(store: Store, session_id: str, *texts: str) -> list[Message]:
    return [await store.append_message(session_id, Message.user(t)) for t in texts]


async def test_a_kept_history_is_reused_and_only_newer_messages_are_read(store: Store) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    await _append(store, session, "one", "two", "three")

    first, _ = await cache.load(counting, session, after_seq=0)  # type: ignore[arg-type]
    cache.keep(session, first, after_seq=0)
    # Another process adds a message: the next load reads just that one.
    await _append(store, session, "four")
    second, _ = await cache.load(counting, session, after_seq=0)  # type: ignore[arg-type]

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
    again, _ = await cache.load(counting, session, after_seq=0)  # type: ignore[arg-type]

    assert [m.seq for m in again] == [1, 2, 3]
    assert counting.read == [3]
    assert cache.held == 0


async def test_messages_out_of_seq_order_are_kept_in_seq_order(store: Store) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    stored = await _append(store, session, "one", "two")

    cache.keep(session, [stored[1], stored[0]], after_seq=0)
    again, _ = await cache.load(counting, session, after_seq=0)  # type: ignore[arg-type]

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
    cut, _ = await cache.load(counting, session, after_seq=2)  # type: ignore[arg-type]
    assert [m.seq for m in cut] == [3, 4]
    cache.keep(session, cut, after_seq=2)
    # A request from before that summary (seq 0) cannot be served from the cache.
    whole, _ = await cache.load(counting, session, after_seq=0)  # type: ignore[arg-type]

    assert [m.seq for m in whole] == [1, 2, 3, 4]
    assert counting.read == [0, 4]


async def test_the_least_recently_used_sessions_are_dropped_over_the_bound(store: Store) -> None:
    cache = HistoryCache(max_messages=5)
    sessions = [(await store.create_session(f"s{i}")).id for i in range(3)]
    for session in sessions:
        cache.keep(session, await _append(store, session, "a", "b"), after_seq=0)

    assert cache.held == 4  # the first session's two went to make room
    counting = CountingStore(store)
    await cache.load(counting, sessions[0], after_seq=0)  # type: ignore[arg-type]
    await cache.load(counting, sessions[2], after_seq=0)  # type: ignore[arg-type]
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


async def test_load_latest_asks_for_the_summary_and_only_what_came_after_the_cache(
    store: Store,
) -> None:
    session = (await store.create_session("s")).id
    counting = CountingStore(store)
    cache = HistoryCache()
    await _append(store, session, "one", "two")

    summary, first, _ = await cache.load_latest(counting, session)  # type: ignore[arg-type]
    cache.keep(session, first, after_seq=0)
    await _append(store, session, "three")
    summary, again, _ = await cache.load_latest(counting, session)  # type: ignore[arg-type]

    assert summary is None
    assert [m.text for m in again] == ["one", "two", "three"]
    assert counting.read == [2, 1]  # the second read only returned the newer message
