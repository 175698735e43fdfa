"""The turn records contract (`TurnRecords`): a turn's look-up, its opening and its closes.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.errors import StoreError
from core.fencing import Fence, FenceOvertaken
from core.messages import Message, ToolCall, Usage
from core.store import CompactionSummary, CostEntry, Store, TurnClose, TurnOpening
from tests.contract.store_support import START

KEY = "telegram:b:c1"


def _inbound(number: int = 1) -> Inbound:
    return Inbound(
        address=Address(platform="telegram", bot="b", chat="c1"),
        user_id="u1",
        text=f"question {number}",
        platform_message_id=str(number),
        received_at=START,
    )


def _checkpoint(inbound: Inbound, session_id: str = "chosen") -> Checkpoint:
    return Checkpoint(
        run_key=inbound.dedupe_key,
        session_id=session_id,
        inbound=inbound,
        started_at=START,
        updated_at=START,
    )


def _asked(inbound: Inbound, message_id: str = "m1") -> Message:
    return Message.user(inbound.text, source=inbound.dedupe_key).model_copy(
        update={"id": message_id}
    )


def _cost(session_id: str, entry_id: str = "e1") -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="r1",
        provider="p",
        model="m",
        usage=Usage(input_tokens=3, output_tokens=2),
        cost_usd=0.25,
        at=START,
        id=entry_id,
    )


async def test_a_first_turn_makes_its_session_saves_its_checkpoint_and_stores_its_message(
    store: Store,
) -> None:
    inbound = _inbound()
    standing = await store.turn_standing(inbound.dedupe_key, KEY)
    assert (standing.processed, standing.checkpoint, standing.session) == (False, None, None)

    opening = TurnOpening(
        session_id="chosen",
        session_key=KEY,
        message=_asked(inbound),
        checkpoint=_checkpoint(inbound),
    )
    start = await store.open_turn(opening)

    assert start.session.id == "chosen" and start.session.key == KEY
    assert (start.summary, start.read_after, start.resumed) == (None, 0, False)
    assert [(m.seq, m.text) for m in start.messages] == [(1, "question 1")]
    assert start.message.seq == 1
    again = await store.turn_standing(inbound.dedupe_key, KEY)
    assert again.session is not None and again.session.id == "chosen"
    assert again.checkpoint == start.checkpoint == _checkpoint(inbound)
    assert not again.processed


async def test_an_opening_goes_to_the_session_another_writer_made_for_the_key(
    store: Store,
) -> None:
    inbound = _inbound()
    made = await store.current_session(KEY)
    start = await store.open_turn(
        TurnOpening(
            session_id="chosen",
            session_key=KEY,
            message=_asked(inbound),
            checkpoint=_checkpoint(inbound),
        )
    )

    assert start.session.id == made.id
    assert start.checkpoint is not None and start.checkpoint.session_id == made.id
    assert await store.get_session("chosen") is None
    assert [m.text for m in await store.list_messages(made.id)] == ["question 1"]


async def test_an_opening_without_a_session_or_a_key_is_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.open_turn(TurnOpening(session_id="none", message=Message.user("hi")))
    assert await store.list_sessions() == []


async def test_an_opening_reads_only_after_what_the_caller_holds_and_the_summary(
    store: Store,
) -> None:
    session = await store.create_session(KEY)
    for text in ("one", "two", "three"):
        await store.append_message(session.id, Message.user(text))
    held = await store.open_turn(
        TurnOpening(session_id=session.id, message=Message.user("four"), after_seq=2)
    )
    assert (held.read_after, [m.text for m in held.messages]) == (2, ["three", "four"])

    await store.save_summary(
        session.id, CompactionSummary(up_to_seq=3, text="so far", created_at=START)
    )
    cut = await store.open_turn(
        TurnOpening(session_id=session.id, message=Message.user("five"), after_seq=1)
    )
    assert cut.summary is not None and cut.summary.up_to_seq == 3
    assert (cut.read_after, [m.text for m in cut.messages]) == (3, ["four", "five"])


async def test_a_message_opened_again_is_resumed_not_stored_twice(store: Store) -> None:
    inbound = _inbound()
    opening = TurnOpening(session_id="chosen", session_key=KEY, message=_asked(inbound))
    first = await store.open_turn(opening)
    # Its turn got as far as a tool call before the worker died; the message comes again
    # (under another id: a new attempt of the turn).
    call = ToolCall(id="c1", name="calculator", arguments={})
    await store.close_turn(TurnClose(session_id="chosen", messages=[Message.assistant("", [call])]))
    again = await store.open_turn(opening.model_copy(update={"message": _asked(inbound, "m2")}))

    assert (first.resumed, again.resumed) == (False, True)
    assert again.message.seq == first.message.seq == 1
    assert [m.role for m in await store.list_messages("chosen")] == ["user", "assistant"]
    # The same message id tried again after a lost answer is not stored twice either.
    once_more = await store.open_turn(
        TurnOpening(session_id="chosen", message=Message.user("x").model_copy(update={"id": "x"}))
    )
    retried = await store.open_turn(
        TurnOpening(session_id="chosen", message=Message.user("x").model_copy(update={"id": "x"}))
    )
    assert once_more.message.seq == retried.message.seq == 3


async def test_a_close_stores_a_steps_messages_costs_and_checkpoint_together(
    store: Store,
) -> None:
    inbound = _inbound()
    start = await store.open_turn(
        TurnOpening(
            session_id="chosen",
            session_key=KEY,
            message=_asked(inbound),
            checkpoint=_checkpoint(inbound),
        )
    )
    assert start.checkpoint is not None
    bumped = start.checkpoint.model_copy(
        update={"tool_rounds": 1, "updated_at": START + timedelta(seconds=1)}
    )
    answer = Message.assistant("done").model_copy(update={"id": "a1"})
    closing = TurnClose(
        session_id="chosen", messages=[answer], costs=[_cost("chosen")], checkpoint=bumped
    )

    stored = await store.close_turn(closing)
    await store.close_turn(closing)  # tried again after a lost answer: kept once

    assert [(m.seq, m.text) for m in stored] == [(2, "done")]
    assert [m.text for m in await store.list_messages("chosen")] == ["question 1", "done"]
    summary = await store.cost_summary("chosen")
    assert (summary.calls, summary.cost_usd) == (1, 0.25)
    assert await store.get_checkpoint(inbound.dedupe_key) == bumped


async def test_closing_a_turn_marks_it_processed_and_completes_only_a_running_checkpoint(
    store: Store,
) -> None:
    running, abandoned, bare = _inbound(1), _inbound(2), _inbound(3)
    await store.save_checkpoint(_checkpoint(running))
    await store.save_checkpoint(_checkpoint(abandoned).model_copy(update={"status": "abandoned"}))

    for inbound in (running, abandoned, bare):
        assert await store.close_turn(TurnClose(finished=inbound.dedupe_key)) == []

    for inbound in (running, abandoned, bare):
        assert await store.is_processed(inbound.dedupe_key)
        assert (await store.turn_standing(inbound.dedupe_key, KEY)).processed
    done = await store.get_checkpoint(running.dedupe_key)
    assert done is not None and done.status == "completed"
    left = await store.get_checkpoint(abandoned.dedupe_key)
    assert left is not None and left.status == "abandoned"
    assert await store.get_checkpoint(bare.dedupe_key) is None
    assert await store.incomplete_checkpoints() == []


async def test_a_close_of_an_unknown_session_writes_nothing(store: Store) -> None:
    inbound = _inbound()
    with pytest.raises(StoreError):
        await store.close_turn(
            TurnClose(
                session_id="none",
                messages=[Message.assistant("lost")],
                finished=inbound.dedupe_key,
            )
        )
    assert not await store.is_processed(inbound.dedupe_key)


async def test_a_stale_claims_opening_and_close_are_refused(store: Store) -> None:
    inbound = _inbound()
    opening = TurnOpening(session_id="chosen", session_key=KEY, message=_asked(inbound))
    await store.open_turn(opening, fence=Fence(session_key=KEY, epoch=2))

    with pytest.raises(FenceOvertaken):
        await store.open_turn(
            opening.model_copy(update={"message": Message.user("late")}),
            fence=Fence(session_key=KEY, epoch=1),
        )
    with pytest.raises(FenceOvertaken):
        await store.close_turn(
            TurnClose(
                session_id="chosen",
                messages=[Message.assistant("late")],
                finished=inbound.dedupe_key,
            ),
            fence=Fence(session_key=KEY, epoch=1),
        )

    assert [m.text for m in await store.list_messages("chosen")] == ["question 1"]
    assert not await store.is_processed(inbound.dedupe_key)
    await store.close_turn(
        TurnClose(session_id="chosen", finished=inbound.dedupe_key),
        fence=Fence(session_key=KEY, epoch=3),
    )
    assert await store.is_processed(inbound.dedupe_key)
