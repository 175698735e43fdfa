"""Dead letters an operator can list, drop and replay, on every `Bus` implementation.

Uses the `bus` and `queue` fixtures of `test_bus_contract.py`.
"""

from __future__ import annotations

import pytest

from core.bus import Bus
from core.bus.dead_letters import replay_dead_letter
from core.envelopes import Address, Outbound
from tests.contract.test_bus_contract import MAX_DELIVERIES, PATIENCE, bus, queue

__all__ = ["bus", "queue"]

ADDRESS = Address(platform="telegram", chat="42")


async def _bury(bus: Bus, queue: str, text: str) -> Outbound:
    """Enqueue an outbound and nack it until the bus gives up on it."""
    outbound = Outbound(kind="notification", address=ADDRESS, text=text)
    await bus.enqueue(queue, outbound)
    for _ in range(MAX_DELIVERIES):
        delivery = await bus.receive(queue, consumer="c", timeout=PATIENCE)
        assert delivery is not None
        await delivery.nack()
    return outbound


async def test_dead_letters_are_listed_with_ids_and_can_be_dropped(bus: Bus, queue: str) -> None:
    first = await _bury(bus, queue, "one")
    second = await _bury(bus, queue, "two")

    entries = await bus.dead_letter_entries(queue)

    assert [e.envelope for e in entries] == [first, second]
    assert {e.queue for e in entries} == {queue}
    assert all(e.deliveries == MAX_DELIVERIES for e in entries)
    assert len({e.id for e in entries}) == 2
    assert await bus.drop_dead_letter(queue, entries[0].id)
    assert not await bus.drop_dead_letter(queue, entries[0].id)
    assert not await bus.drop_dead_letter(queue, "not-an-id")
    assert not await bus.drop_dead_letter(f"{queue}.other", entries[1].id)
    assert await bus.dead_letters(queue) == [second]


async def test_a_replayed_dead_letter_is_queued_again_once(bus: Bus, queue: str) -> None:
    buried = await _bury(bus, queue, "again")
    [entry] = await bus.dead_letter_entries(queue)

    assert await replay_dead_letter(bus, entry) is not None

    delivery = await bus.receive(queue, consumer="c", timeout=PATIENCE)
    assert delivery is not None and delivery.envelope == buried
    assert delivery.attempt == 1
    await delivery.ack()
    assert await bus.dead_letter_entries(queue) == []
    with pytest.raises(LookupError):
        await replay_dead_letter(bus, entry)
