"""The session forks contract (`SessionForks`): a session forked into a copy of its history,
switching between the sessions of one key, and listing them.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import pytest

from core.errors import StoreError
from core.fencing import Fence, FenceOvertaken
from core.messages import Message, Usage
from core.store import CompactionSummary, CostEntry, Store, TurnOpening
from tests.contract.store_support import START, OpenStore, TickingClock

KEY = "telegram:b:-100"


async def _conversation(store: Store) -> str:
    """A session of KEY with three messages, a summary of the first two, a kept tool output,
    a chosen model and a cost."""
    opened = await store.open_turn(
        TurnOpening(
            session_id="s1",
            session_key=KEY,
            message=Message.user("about otters", source="m1", author="telegram:7").model_copy(
                update={"id": "u1"}
            ),
        )
    )
    await store.append_message("s1", Message.assistant("otters hold hands"))
    await store.append_message("s1", Message.user("and beavers?", author="telegram:7"))
    await store.save_summary(
        "s1", CompactionSummary(up_to_seq=2, text="otters were discussed", created_at=START)
    )
    await store.keep_tool_output("s1", "call-1", "the whole otter page")
    await store.set_session_model("s1", "gpt-4o-mini")
    await store.record_cost(
        CostEntry(
            session_id="s1",
            run_id="r",
            provider="p",
            model="m",
            usage=Usage(input_tokens=10, output_tokens=5),
            cost_usd=0.5,
            at=START,
        )
    )
    return opened.session.id


async def test_a_fork_copies_the_history_and_becomes_current(store: Store) -> None:
    original = await _conversation(store)

    fork = await store.fork_session(original, name="beavers")

    assert fork.id != original and fork.key == KEY
    assert fork.name == "beavers" and fork.forked_from == original
    assert fork.message_count == 3 and fork.model == "gpt-4o-mini"
    assert (await store.current_session(KEY)).id == fork.id
    copied = await store.list_messages(fork.id)
    kept = await store.list_messages(original)
    assert [(m.seq, m.role, m.text, m.id, m.author, m.source) for m in copied] == [
        (m.seq, m.role, m.text, m.id, m.author, m.source) for m in kept
    ]
    summary = await store.latest_summary(fork.id)
    assert summary is not None and summary.up_to_seq == 2
    assert summary.text == "otters were discussed"
    assert await store.tool_output(fork.id, "call-1") == "the whole otter page"
    # What the original cost stays the original's.
    assert (await store.cost_summary(fork.id)).calls == 0
    assert (await store.cost_summary(original)).calls == 1


async def test_the_fork_and_the_original_go_their_own_ways(store: Store) -> None:
    original = await _conversation(store)
    fork = await store.fork_session(original)

    await store.append_message(fork.id, Message.user("beavers build dams"))
    await store.append_message(original, Message.user("otters again"))

    assert [m.text for m in await store.list_messages(fork.id)][-1] == "beavers build dams"
    assert [m.seq for m in await store.list_messages(fork.id)] == [1, 2, 3, 4]
    assert [m.text for m in await store.list_messages(original)][-1] == "otters again"
    assert fork.name is None
    # A fork of a fork: the copy of the copy.
    deeper = await store.fork_session(fork.id)
    assert deeper.forked_from == fork.id and deeper.message_count == 4


async def test_switching_moves_the_current_session_within_its_key_only(store: Store) -> None:
    original = await _conversation(store)
    fork = await store.fork_session(original)
    elsewhere = await store.current_session("telegram:b:-200")

    switched = await store.switch_session(KEY, original)

    assert switched is not None and switched.id == original
    assert switched.updated_at > fork.updated_at  # switching counts as activity
    assert (await store.current_session(KEY)).id == original
    # Another key's session is never reached, and nothing moves.
    assert await store.switch_session(KEY, elsewhere.id) is None
    assert await store.switch_session("telegram:b:-200", fork.id) is None
    assert await store.switch_session(KEY, "no-such-session") is None
    assert (await store.current_session(KEY)).id == original
    assert (await store.current_session("telegram:b:-200")).id == elsewhere.id
    # Forward to the fork again; `/new` then starts a fresh one as before.
    assert await store.switch_session(KEY, fork.id) is not None
    assert (await store.current_session(KEY)).id == fork.id
    fresh = await store.create_session(KEY)
    assert (await store.current_session(KEY)).id == fresh.id


async def test_a_fork_of_a_switched_to_session_is_current(store: Store) -> None:
    original = await _conversation(store)
    fork = await store.fork_session(original)
    await store.switch_session(KEY, original)

    again = await store.fork_session(original, name="second")

    assert (await store.current_session(KEY)).id == again.id
    assert again.id != fork.id


async def test_sessions_of_lists_one_key_newest_first(store: Store) -> None:
    original = await _conversation(store)
    fork = await store.fork_session(original, name="x")
    fresh = await store.create_session(KEY)
    await store.current_session("telegram:b:-200")

    listed = await store.sessions_of(KEY)

    assert [s.id for s in listed] == [fresh.id, fork.id, original]
    assert [s.message_count for s in listed] == [0, 3, 3]
    assert [s.id for s in await store.sessions_of(KEY, limit=1)] == [fresh.id]
    assert await store.sessions_of("telegram:b:nobody") == []


async def test_a_fork_refuses_an_unknown_session_and_a_taken_name(store: Store) -> None:
    original = await _conversation(store)
    await store.fork_session(original, name="taken")

    with pytest.raises(StoreError):
        await store.fork_session("no-such-session")
    with pytest.raises(StoreError):
        await store.fork_session(original, name="taken")
    assert len(await store.sessions_of(KEY)) == 2
    # The same name in another chat is another chat's business.
    other = await store.current_session("telegram:b:-200")
    await store.append_message(other.id, Message.user("hi"))
    assert (await store.fork_session(other.id, name="taken")).name == "taken"


async def test_a_fork_is_kept_across_a_restart(open_store: OpenStore) -> None:
    store = await open_store(TickingClock())
    original = await _conversation(store)
    fork = await store.fork_session(original, name="kept")

    again = await open_store(TickingClock())

    assert await again.get_session(fork.id) == fork
    assert (await again.current_session(KEY)).id == fork.id


async def test_a_fork_or_a_switch_of_an_overtaken_claim_changes_nothing(store: Store) -> None:
    original = await _conversation(store)
    fork = await store.fork_session(original, fence=Fence(session_key=KEY, epoch=5))
    assert await store.switch_session(KEY, original, fence=Fence(session_key=KEY, epoch=6))

    with pytest.raises(FenceOvertaken):
        await store.fork_session(original, name="late", fence=Fence(session_key=KEY, epoch=5))
    with pytest.raises(FenceOvertaken):
        await store.switch_session(KEY, fork.id, fence=Fence(session_key=KEY, epoch=5))

    assert [s.id for s in await store.sessions_of(KEY)] == [fork.id, original]
    assert (await store.current_session(KEY)).id == original
