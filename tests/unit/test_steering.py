"""`Steering`: which waiting messages join a running turn, and when "collect" waits.

Real `MemoryMailboxes` and `SqlStore` (SQLite); the clock is fixed and the pause records
what it was asked to wait instead of waiting.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.arrivals import BusyMode
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.mailbox.base import Claim
from core.outages import Patience
from core.policy import ChannelPolicy
from core.turns.steering import Steering
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.integration.helpers import RecordingSleep

ARRIVED = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
CHAT = Address(platform="telegram", chat="42")


def said(text: str, user_id: str = "u1", **extra: object) -> Inbound:
    return Inbound(
        address=CHAT,
        user_id=user_id,
        text=text,
        is_direct=True,
        received_at=ARRIVED,
        **extra,
    )


async def claimed(*inbounds: Inbound) -> tuple[MemoryMailboxes, Claim, Inbound]:
    boxes = MemoryMailboxes()
    for inbound in inbounds:
        await boxes.put(inbound)
    claim = await boxes.claim(inbounds[0].session_key, owner="w")
    assert claim is not None
    head = await claim.head()
    assert head is not None
    return boxes, claim, head


def steering(
    claim: Claim,
    head: Inbound,
    store: SqlStore,
    mode: BusyMode,
    *,
    now: datetime = ARRIVED,
    pause: RecordingSleep | None = None,
) -> Steering:
    return Steering(
        claim=claim,
        head=head,
        marks=store,
        policy=ChannelPolicy(max_input_chars=10),
        mode=mode,
        window=1.5,
        patience=Patience(),
        clock=lambda: now,
        pause=pause or RecordingSleep(),
    )


async def test_collect_waits_out_the_window_from_the_first_messages_arrival(
    store: SqlStore,
) -> None:
    _, claim, head = await claimed(said("a"), said("b"))
    pause = RecordingSleep()
    later = ARRIVED + timedelta(seconds=0.5)
    collect = steering(claim, head, store, "collect", now=later, pause=pause)
    assert [a.inbound.text for a in await collect.joining(1)] == ["b"]
    assert pause.waits == [1.0]  # 1.5 s from the head's arrival, 0.5 s of them gone
    # Only the first call is collected for: later calls find nothing to join.
    assert await collect.joining(2) == []
    assert pause.waits == [1.0]


async def test_collect_past_its_window_does_not_wait(store: SqlStore) -> None:
    _, claim, head = await claimed(said("a"), said("b"))
    pause = RecordingSleep()
    late = ARRIVED + timedelta(seconds=3)
    collect = steering(claim, head, store, "collect", now=late, pause=pause)
    assert [a.inbound.text for a in await collect.joining(1)] == ["b"]
    assert pause.waits == []


async def test_steer_joins_before_every_call_without_waiting(store: SqlStore) -> None:
    boxes, claim, head = await claimed(said("a"), said("b"))
    pause = RecordingSleep()
    steer = steering(claim, head, store, "steer", pause=pause)
    (arrival,) = await steer.joining(1)
    # The joined message is stored with the head's key as its source: a turn resumed after a
    # crash finds it the newest person's message of its own turn.
    assert arrival.message.source == head.dedupe_key
    assert arrival.message.id is not None
    # Kept as the person's words, so `switchboard people` finds them in a group too.
    assert arrival.message.author == "telegram:u1"
    await steer.joined(arrival)
    assert await steer.joining(2) == []
    await boxes.put(said("c"))
    assert [a.inbound.text for a in await steer.joining(3)] == ["c"]
    assert pause.waits == []


async def test_only_the_same_persons_messages_join_up_to_the_first_that_cannot(
    store: SqlStore,
) -> None:
    _, claim, head = await claimed(
        said("a"), said("b"), said("far too long a text"), said("d"), said("e", "u2")
    )
    steer = steering(claim, head, store, "steer")
    # The long one gets its own turn (and its notice); those behind it keep their place.
    assert [a.inbound.text for a in await steer.joining(1)] == ["b"]

    _, claim, head = await claimed(said("a"), said("theirs", "u2"), said("mine"))
    assert await steering(claim, head, store, "steer").joining(1) == []


async def test_a_message_joined_before_a_crash_is_only_taken_out(store: SqlStore) -> None:
    joined, fresh = said("b"), said("c")
    boxes, claim, head = await claimed(said("a"), joined, fresh)
    await store.mark_processed(joined.dedupe_key)
    steer = steering(claim, head, store, "steer")
    assert [a.inbound.text for a in await steer.joining(1)] == ["c"]
    assert [m.text for m in boxes.boxes[head.session_key]] == ["a", "c"]


async def test_a_redelivered_copy_is_taken_out_not_joined(store: SqlStore) -> None:
    def copy_of(text: str, message_id: str) -> Inbound:
        return said(text, platform_message_id=message_id)

    head_copy, late, late_copy = copy_of("a", "m1"), copy_of("b", "m2"), copy_of("b", "m2")
    boxes, claim, head = await claimed(copy_of("a", "m1"), head_copy, late, late_copy)
    steer = steering(claim, head, store, "steer")
    assert [a.inbound.id for a in await steer.joining(1)] == [late.id]
    assert [m.id for m in boxes.boxes[head.session_key]] == [head.id, late.id]


async def test_queue_joins_nothing(store: SqlStore) -> None:
    _, claim, head = await claimed(said("a"), said("b"))
    assert await steering(claim, head, store, "queue").joining(1) == []
