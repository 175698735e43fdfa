"""`queue_stats`: every bus says how many entries wait, how old the oldest is, how many died."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.bus import Bus
from core.bus.stats import QueueStats, QueueStatsReader
from core.clock import utc_now
from core.envelopes import Address, Inbound
from tests.contract.test_bus_contract import (  # noqa: F401  (fixtures, used by name)
    MAX_DELIVERIES,
    bus,
    queue,
)

ADDRESS = Address(platform="telegram", chat="42")


def _stats_of(opened: Bus) -> QueueStatsReader:
    assert isinstance(opened, QueueStatsReader)
    return opened


async def test_an_unused_queue_is_empty(bus: Bus, queue: str) -> None:  # noqa: F811
    assert await _stats_of(bus).queue_stats(queue) == QueueStats(0, 0.0, 0)


async def test_depth_counts_waiting_and_leased_entries_until_acked(
    bus: Bus,  # noqa: F811
    queue: str,  # noqa: F811
) -> None:
    old = utc_now() - timedelta(seconds=30)
    await bus.enqueue(queue, Inbound(address=ADDRESS, text="first", received_at=old))
    await bus.enqueue(queue, Inbound(address=ADDRESS, text="second"))

    stats = await _stats_of(bus).queue_stats(queue)
    assert (stats.depth, stats.dead) == (2, 0)
    # Memory and SQLite date an entry by its envelope, Redis by its stream id (enqueue time).
    assert 0.0 <= stats.oldest_seconds < 60.0

    taken = await bus.receive(queue, consumer="c", timeout=1)
    assert taken is not None
    assert (await _stats_of(bus).queue_stats(queue)).depth == 2  # leased, not done yet
    await taken.ack()
    assert (await _stats_of(bus).queue_stats(queue)).depth == 1


@pytest.mark.parametrize("bus", ["memory", "sqlite"], indirect=True)
async def test_the_oldest_age_comes_from_the_envelope_embedded(bus: Bus, queue: str) -> None:  # noqa: F811
    old = utc_now() - timedelta(seconds=30)
    await bus.enqueue(queue, Inbound(address=ADDRESS, text="first", received_at=old))

    assert (await _stats_of(bus).queue_stats(queue)).oldest_seconds >= 29.0


async def test_an_entry_given_up_on_counts_as_dead(bus: Bus, queue: str) -> None:  # noqa: F811
    await bus.enqueue(queue, Inbound(address=ADDRESS, text="poison"))
    for _ in range(MAX_DELIVERIES):
        taken = await bus.receive(queue, consumer="c", timeout=1)
        assert taken is not None
        await taken.nack()
    # Redis moves an entry to its dead letters when the next consumer asks.
    assert await bus.receive(queue, consumer="c", timeout=0) is None

    assert await _stats_of(bus).queue_stats(queue) == QueueStats(0, 0.0, 1)
