"""`delete_session`: an operator deletes a conversation; its spending stays in the ledger.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from core.messages import Message, Usage
from core.store import CompactionSummary, Store
from core.store.ledger import CostEntry
from tests.contract.store_support import START


async def test_a_deleted_session_is_gone_with_its_messages_and_summaries(store: Store) -> None:
    kept = await store.current_session("telegram:1")
    doomed = await store.current_session("telegram:2")
    await store.append_message(kept.id, Message.user("keep me"))
    await store.append_message(doomed.id, Message.user("forget me"))
    await store.save_summary(doomed.id, CompactionSummary(up_to_seq=1, text="s", created_at=START))

    assert await store.delete_session(doomed.id) is True

    assert await store.get_session(doomed.id) is None
    assert await store.list_messages(doomed.id) == []
    assert await store.latest_summary(doomed.id) is None
    assert [s.id for s in await store.list_sessions()] == [kept.id]
    assert [m.text for m in await store.list_messages(kept.id)] == ["keep me"]
    assert await store.delete_session(doomed.id) is False


async def test_the_key_starts_afresh_after_its_session_was_deleted(store: Store) -> None:
    first = await store.current_session("slack:T:C")
    await store.create_session("slack:T:C")
    reopened = await store.reopen_session(first.id)
    assert reopened is not None

    await store.delete_session(first.id)
    current = await store.current_session("slack:T:C")

    assert current.id != first.id
    assert await store.get_session(current.id) is not None


async def test_what_a_deleted_session_spent_stays_in_the_ledger(store: Store) -> None:
    doomed = await store.current_session("discord:9")
    usage = Usage(input_tokens=100, output_tokens=20)
    await store.record_cost(
        CostEntry(
            session_id=doomed.id,
            run_id="r",
            provider="openai",
            model="gpt-4o-mini",
            usage=usage,
            cost_usd=0.5,
            at=START,
        )
    )

    await store.delete_session(doomed.id)

    total = await store.cost_summary(None)
    assert (total.calls, total.usage, total.cost_usd) == (1, usage, 0.5)
    assert (await store.cost_summary(doomed.id)).calls == 1
