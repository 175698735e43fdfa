"""The conversation log contract (`ConversationLog`): sessions, messages, compaction summaries,
and fenced writes.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta

import pytest

from core.errors import StoreError
from core.fencing import Fence
from core.messages import ImagePart, Message, TextPart, ToolCall, Usage
from core.store import (
    CompactionSummary,
    ConversationLog,
    Store,
)
from core.store.log import new_session_id
from tests.contract.store_support import START, OpenStore, TickingClock, is_utc

# Sessions


async def test_current_session_creates_one_and_then_returns_it(store: ConversationLog) -> None:
    first = await store.current_session("telegram:42")
    again = await store.current_session("telegram:42")

    assert first.key == "telegram:42"
    assert first.message_count == 0
    assert is_utc(first.created_at) and is_utc(first.updated_at)
    assert again.id == first.id
    assert await store.get_session(first.id) == first


async def test_current_session_makes_one_under_the_id_it_is_given(store: ConversationLog) -> None:
    chosen = new_session_id()
    made = await store.current_session("telegram:5", new_id=chosen)
    assert made.id == chosen and made.key == "telegram:5"
    assert await store.get_session(chosen) == made

    # The key has a session now: another id given is not used, the existing session returned.
    again = await store.current_session("telegram:5", new_id=new_session_id())
    assert again.id == chosen
    assert [s.id for s in await store.list_sessions()] == [chosen]

    # An id that is already another key's session is refused, and nothing is made.
    with pytest.raises(StoreError):
        await store.current_session("telegram:6", new_id=chosen)
    assert await store.find_current_session("telegram:6") is None
    assert await store.get_session(chosen) == made


async def test_find_current_session_finds_without_making_one(store: ConversationLog) -> None:
    assert await store.find_current_session("telegram:7") is None
    assert await store.list_sessions() == []  # looking made nothing
    made = await store.current_session("telegram:7")
    assert await store.find_current_session("telegram:7") == made
    await store.append_message(made.id, Message.user("hello"))
    found = await store.find_current_session("telegram:7")
    assert found is not None and found.id == made.id and found.message_count == 1
    fresh = await store.create_session("telegram:7")
    found = await store.find_current_session("telegram:7")
    assert found is not None and found.id == fresh.id
    await store.reopen_session(made.id)
    found = await store.find_current_session("telegram:7")
    assert found is not None and found.id == made.id


async def test_sessions_of_different_keys_are_separate(store: ConversationLog) -> None:
    a = await store.current_session("slack:T1:C1")
    b = await store.current_session("slack:T1:C2")

    assert a.id != b.id
    assert (await store.current_session("slack:T1:C1")).id == a.id


async def test_create_session_becomes_the_current_one(store: ConversationLog) -> None:
    """`/new`: a fresh session replaces the current one for its key only."""
    old = await store.current_session("discord:7")
    other = await store.current_session("discord:8")

    fresh = await store.create_session("discord:7")

    assert fresh.id != old.id
    assert fresh.key == "discord:7"
    assert fresh.message_count == 0
    assert fresh.created_at >= old.created_at
    assert (await store.current_session("discord:7")).id == fresh.id
    assert (await store.current_session("discord:8")).id == other.id
    assert await store.get_session(old.id) is not None


async def test_a_reopened_session_is_current_until_the_next_new_one(
    store: ConversationLog,
) -> None:
    """`chat --session <old id>` after `/new`: the old conversation goes on, not the newer."""
    old = await store.current_session("terminal:local:a")
    await store.append_message(old.id, Message.user("first conversation"))
    newer = await store.create_session("terminal:local:a")
    other = await store.current_session("terminal:local:b")

    reopened = await store.reopen_session(old.id)

    assert reopened is not None and reopened.id == old.id
    assert reopened.message_count == 1
    assert (await store.current_session("terminal:local:a")).id == old.id
    assert (await store.current_session("terminal:local:b")).id == other.id
    assert await store.reopen_session("no-such-session") is None
    # Reopening the newer one, then `/new`: each step moves the key's current session.
    await store.reopen_session(newer.id)
    assert (await store.current_session("terminal:local:a")).id == newer.id
    fresh = await store.create_session("terminal:local:a")
    assert (await store.current_session("terminal:local:a")).id == fresh.id


async def test_a_session_keeps_its_chosen_model_across_a_restart(open_store: OpenStore) -> None:
    store = await open_store(TickingClock())
    chosen = await store.current_session("telegram:42")
    other = await store.current_session("telegram:7")
    assert chosen.model is None  # a new session uses the profile's default

    assert await store.set_session_model(chosen.id, "gpt-4o-mini") is True

    again = await open_store(TickingClock())  # another process, or this one restarted
    assert (await again.current_session("telegram:42")).model == "gpt-4o-mini"
    assert (await again.get_session(chosen.id)).model == "gpt-4o-mini"  # type: ignore[union-attr]
    assert (await again.current_session("telegram:7")).model is None
    assert {s.id: s.model for s in await again.list_sessions()} == {
        chosen.id: "gpt-4o-mini",
        other.id: None,
    }
    assert await again.set_session_model(chosen.id, None) is True  # /model reset
    assert (await store.current_session("telegram:42")).model is None


async def test_setting_the_model_of_an_unknown_session_says_so(store: ConversationLog) -> None:
    assert await store.set_session_model("nope", "gpt-4o-mini") is False
    assert await store.list_sessions() == []


async def test_create_session_ids_are_unique(store: ConversationLog) -> None:
    sessions = [await store.create_session("terminal") for _ in range(20)]

    assert len({s.id for s in sessions}) == 20


async def test_concurrent_current_session_makes_one_session(store: ConversationLog) -> None:
    found = await asyncio.gather(*(store.current_session("web:1") for _ in range(10)))

    assert len({s.id for s in found}) == 1


async def test_get_session_of_unknown_id_is_none(store: ConversationLog) -> None:
    await store.current_session("terminal")

    assert await store.get_session("nosuchsessio") is None


async def test_get_session_counts_messages(store: ConversationLog) -> None:
    session = await store.current_session("terminal")
    await store.append_message(session.id, Message.user("one"))
    await store.append_message(session.id, Message.assistant("two"))

    found = await store.get_session(session.id)

    assert found is not None
    assert found.message_count == 2
    assert (await store.current_session("terminal")).message_count == 2


async def test_list_sessions_most_recently_updated_first(store: ConversationLog) -> None:
    first = await store.create_session("a")
    second = await store.create_session("b")
    third = await store.create_session("c")
    await store.append_message(first.id, Message.user("bump"))

    listed = await store.list_sessions()

    assert [s.id for s in listed] == [first.id, third.id, second.id]
    assert [s.message_count for s in listed] == [1, 0, 0]
    assert listed[0].updated_at > first.updated_at


async def test_list_sessions_honours_limit(store: ConversationLog) -> None:
    made = [await store.create_session(f"key{i}") for i in range(5)]

    listed = await store.list_sessions(limit=2)

    assert [s.id for s in listed] == [made[4].id, made[3].id]


async def test_list_sessions_of_empty_store_is_empty(store: ConversationLog) -> None:
    assert await store.list_sessions() == []


# Messages


async def test_append_assigns_seq_and_created_at(store: ConversationLog) -> None:
    session = await store.current_session("terminal")
    message = Message.user("hello")

    stored = await store.append_message(session.id, message)

    assert stored.seq == 1
    assert is_utc(stored.created_at)
    assert stored.model_copy(update={"seq": 0, "created_at": None}) == message
    assert message.seq == 0


async def test_seq_counts_per_session_independently(store: ConversationLog) -> None:
    a = await store.create_session("a")
    b = await store.create_session("b")

    seqs_a = [(await store.append_message(a.id, Message.user(f"a{i}"))).seq for i in range(3)]
    seqs_b = [(await store.append_message(b.id, Message.user(f"b{i}"))).seq for i in range(2)]
    seqs_a.append((await store.append_message(a.id, Message.user("a3"))).seq)

    assert seqs_a == [1, 2, 3, 4]
    assert seqs_b == [1, 2]
    assert [m.text for m in await store.list_messages(a.id)] == ["a0", "a1", "a2", "a3"]
    assert [m.text for m in await store.list_messages(b.id)] == ["b0", "b1"]


async def test_concurrent_appends_get_unique_contiguous_seqs(store: ConversationLog) -> None:
    session = await store.current_session("terminal")
    other = await store.create_session("other")

    stored = await asyncio.gather(
        *(store.append_message(session.id, Message.user(f"m{i}")) for i in range(50)),
        *(store.append_message(other.id, Message.user(f"o{i}")) for i in range(10)),
    )

    ours, theirs = stored[:50], stored[50:]
    assert sorted(m.seq for m in ours) == list(range(1, 51))
    assert sorted(m.seq for m in theirs) == list(range(1, 11))
    listed = await store.list_messages(session.id)
    assert [m.seq for m in listed] == list(range(1, 51))
    assert {m.seq: m.text for m in listed} == {m.seq: m.text for m in ours}
    found = await store.get_session(session.id)
    assert found is not None and found.message_count == 50


async def test_list_messages_after_seq_and_limit(store: ConversationLog) -> None:
    session = await store.current_session("terminal")
    for i in range(1, 6):
        await store.append_message(session.id, Message.user(f"m{i}"))

    async def seqs(*, after_seq: int = 0, limit: int | None = None) -> list[int]:
        found = await store.list_messages(session.id, after_seq=after_seq, limit=limit)
        return [m.seq for m in found]

    assert await seqs() == [1, 2, 3, 4, 5]
    assert await seqs(after_seq=2) == [3, 4, 5]
    assert await seqs(limit=2) == [1, 2]
    assert await seqs(after_seq=2, limit=2) == [3, 4]
    assert await seqs(after_seq=4, limit=10) == [5]
    assert await seqs(after_seq=5) == []
    assert await seqs(limit=0) == []


async def test_list_messages_of_unknown_session_is_empty(store: ConversationLog) -> None:
    assert await store.list_messages("nosuchsessio") == []


async def test_every_message_field_round_trips(store: Store) -> None:
    session = await store.current_session("terminal")
    call = ToolCall(
        id="call_1",
        name="schedule",
        arguments={
            "when": {"cron": "0 9 * * 1", "tz": "Europe/Berlin"},
            "targets": [1, 2.5, None, True, {"deep": ["x", {"y": "ü 😀"}]}],
        },
    )
    bad_call = ToolCall(id="call_2", name="calc", raw_arguments="not json {")
    messages = [
        Message(role="system", content=[TextPart(text="You are terse.")]),
        Message.user(
            "look at these",
            images=[
                ImagePart(media_type="image/png", data=bytes(range(256))),
                ImagePart(media_type="image/jpeg", data=b"\xff\xd8\xff\x00\x80\xfe"),
                ImagePart(media_type="image/webp", data=b""),
            ],
        ),
        Message.assistant(
            "Let me check.",
            tool_calls=[call, bad_call],
            usage=Usage(
                input_tokens=120, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=7
            ),
        ),
        Message.tool_result(call, "scheduled"),
        Message.tool_result(bad_call, "arguments are not a JSON object", is_error=True),
        Message(role="assistant"),
    ]

    stored = [await store.append_message(session.id, m) for m in messages]
    listed = await store.list_messages(session.id)

    assert listed == stored
    for original, back in zip(messages, listed, strict=True):
        if original.images:
            back = back.model_copy(update={"content": original.content})
        assert back.model_copy(update={"seq": 0, "created_at": None}) == original
    # Images come back as references to bytes kept apart (`StoredImages`).
    png, jpeg, empty = listed[1].images
    assert (png.data, jpeg.data) == (b"", b"")
    assert png.ref == hashlib.sha256(bytes(range(256))).hexdigest()
    assert await store.image(session.id, png.ref) == bytes(range(256))
    assert jpeg.ref is not None
    assert await store.image(session.id, jpeg.ref) == b"\xff\xd8\xff\x00\x80\xfe"
    assert empty.ref is None and empty.media_type == "image/webp"
    assert listed[1].text == "look at these"
    assert listed[4].is_error is True
    assert listed[4].tool_call_id == "call_2" and listed[4].name == "calc"
    assert all(is_utc(m.created_at) for m in listed)


async def test_append_to_unknown_session_raises_store_error(store: ConversationLog) -> None:
    with pytest.raises(StoreError, match="nosuchsessio"):
        await store.append_message("nosuchsessio", Message.user("lost"))

    assert await store.list_messages("nosuchsessio") == []
    assert await store.list_sessions() == []


async def test_failed_append_leaves_store_usable(store: ConversationLog) -> None:
    session = await store.current_session("terminal")
    with pytest.raises(StoreError):
        await store.append_message("nosuchsessio", Message.user("lost"))

    stored = await store.append_message(session.id, Message.user("kept"))

    assert stored.seq == 1


# Compaction summaries


async def test_a_session_without_summaries_has_none(store: ConversationLog) -> None:
    session = await store.current_session("terminal")

    assert await store.latest_summary(session.id) is None
    assert await store.latest_summary("nosuchsessio") is None


async def test_the_latest_summary_has_the_highest_marker_and_the_history_stays(
    store: Store,
) -> None:
    session = await store.current_session("terminal")
    other = await store.create_session("other")
    for i in range(1, 7):
        await store.append_message(session.id, Message.user(f"m{i}"))
    first = CompactionSummary(up_to_seq=2, text="We said hello.", created_at=START)
    second = CompactionSummary(
        up_to_seq=4, text="We said hello twice. 😀", created_at=START + timedelta(minutes=1)
    )

    await store.save_summary(session.id, first)
    assert await store.latest_summary(session.id) == first
    await store.save_summary(session.id, second)
    await store.save_summary(session.id, first)

    assert await store.latest_summary(session.id) == second
    assert await store.latest_summary(other.id) is None
    assert [m.seq for m in await store.list_messages(session.id)] == [1, 2, 3, 4, 5, 6]


async def test_a_summary_for_the_same_marker_replaces_the_stored_one(
    store: ConversationLog,
) -> None:
    session = await store.current_session("terminal")
    await store.save_summary(
        session.id, CompactionSummary(up_to_seq=3, text="old", created_at=START)
    )
    again = CompactionSummary(up_to_seq=3, text="new", created_at=START + timedelta(hours=1))

    await store.save_summary(session.id, again)
    await store.save_summary(session.id, again)

    found = await store.latest_summary(session.id)
    assert found == again
    assert found is not None and is_utc(found.created_at)


async def test_summaries_of_unknown_sessions_and_naive_times_are_refused(
    store: ConversationLog,
) -> None:
    session = await store.current_session("terminal")

    with pytest.raises(StoreError):
        await store.save_summary(
            "nosuchsessio", CompactionSummary(up_to_seq=1, text="x", created_at=START)
        )
    with pytest.raises(StoreError):
        await store.save_summary(
            session.id,
            CompactionSummary(up_to_seq=1, text="x", created_at=START.replace(tzinfo=None)),
        )
    assert await store.latest_summary(session.id) is None


# Fenced writes: the store keeps the highest fencing epoch per session key (core/fencing.py)


def _fence(epoch: int, key: str = "telegram:b:42") -> Fence:
    return Fence(session_key=key, epoch=epoch)


async def test_a_write_fenced_by_an_overtaken_claim_is_refused(store: ConversationLog) -> None:
    session = await store.current_session("telegram:b:42")
    await store.append_message(session.id, Message.user("old claim"), fence=_fence(5))
    await store.append_message(session.id, Message.user("new claim"), fence=_fence(6))

    with pytest.raises(StoreError, match="overtaken"):
        await store.append_message(session.id, Message.user("late"), fence=_fence(5))

    texts = [m.text for m in await store.list_messages(session.id)]
    assert texts == ["old claim", "new claim"]


async def test_writes_of_the_same_claim_and_of_newer_ones_are_accepted(
    store: ConversationLog,
) -> None:
    session = await store.current_session("telegram:b:42")
    for epoch, text in [(3, "first"), (3, "same claim"), (9, "newer claim"), (9, "again")]:
        await store.append_message(session.id, Message.user(text), fence=_fence(epoch))

    with pytest.raises(StoreError):
        await store.append_message(session.id, Message.user("stale"), fence=_fence(8))
    assert [m.seq for m in await store.list_messages(session.id)] == [1, 2, 3, 4]


async def test_fences_of_other_session_keys_do_not_interfere(store: ConversationLog) -> None:
    mine = await store.current_session("telegram:b:1")
    other = await store.current_session("telegram:b:2")
    await store.append_message(other.id, Message.user("x"), fence=_fence(100, "telegram:b:2"))

    stored = await store.append_message(mine.id, Message.user("y"), fence=_fence(1, "telegram:b:1"))
    assert stored.seq == 1


async def test_an_unfenced_write_is_not_checked_and_does_not_move_the_fence(
    store: ConversationLog,
) -> None:
    session = await store.current_session("telegram:b:42")
    await store.append_message(session.id, Message.user("fenced"), fence=_fence(7))
    await store.append_message(session.id, Message.user("unfenced"))

    # The unfenced write left the highest epoch at 7: 7 still writes, 6 still does not.
    await store.append_message(session.id, Message.user("same claim"), fence=_fence(7))
    with pytest.raises(StoreError):
        await store.append_message(session.id, Message.user("stale"), fence=_fence(6))


async def test_a_refused_write_to_an_unknown_session_does_not_move_the_fence(
    store: ConversationLog,
) -> None:
    session = await store.current_session("telegram:b:42")
    with pytest.raises(StoreError):
        await store.append_message("no-such-session", Message.user("x"), fence=_fence(50))

    stored = await store.append_message(session.id, Message.user("y"), fence=_fence(10))
    assert stored.seq == 1


# A write tried again (its first answer lost with the connection)


async def test_a_message_stored_again_under_its_id_is_stored_once(store: Store) -> None:
    session = await store.current_session("telegram:retry")
    message = Message.user("once", source="telegram:update:1").model_copy(update={"id": "m-1"})

    first = await store.append_message(session.id, message)
    again = await store.append_message(session.id, message)
    later = await store.append_message(session.id, Message.user("next"))

    assert (first.seq, again.seq, later.seq) == (1, 1, 2)
    assert again.created_at == first.created_at
    assert [(m.text, m.id) for m in await store.list_messages(session.id)] == [
        ("once", "m-1"),
        ("next", None),
    ]
    # The id is the message's within its session: another session stores its own.
    other = await store.current_session("telegram:other")
    assert (await store.append_message(other.id, message)).seq == 1


async def test_messages_without_an_id_are_each_stored(store: Store) -> None:
    session = await store.current_session("telegram:no-ids")
    for _ in range(2):
        await store.append_message(session.id, Message.user("same"))
    assert [m.seq for m in await store.list_messages(session.id)] == [1, 2]
