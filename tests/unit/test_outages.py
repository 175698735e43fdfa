"""`Patience`: a call tried again while the store or the bus is away, within a budget, and an
outage logged once when it starts and once when it ends."""

from __future__ import annotations

import logging

import pytest

from core.errors import BusUnavailable, StoreError, StoreUnavailable
from core.outages import Patience


class _Flaky:
    """Fails its first `failures` calls with `error`, then answers "ok"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


async def test_a_call_that_meets_an_outage_is_made_again_until_it_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="core.outages")
    patience = Patience("turns")
    flaky = _Flaky(2, BusUnavailable("cannot enqueue: Redis is unreachable"))

    assert await patience(flaky) == "ok"

    assert flaky.calls == 3
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            logging.WARNING,
            "turns are waiting for the store or the bus: cannot enqueue: Redis is unreachable",
        ),
        (logging.INFO, "turns: the store and the bus answer again"),
    ]
    assert all(r.exc_info is None for r in caplog.records)


async def test_an_error_that_is_not_an_outage_is_raised_at_once() -> None:
    flaky = _Flaky(1, StoreError("stored data is invalid"))

    with pytest.raises(StoreError, match="invalid"):
        await Patience()(flaky)

    assert flaky.calls == 1


async def test_an_outage_longer_than_the_budget_is_raised() -> None:
    flaky = _Flaky(1_000, StoreUnavailable("the disk is full"))

    with pytest.raises(StoreUnavailable, match="disk is full"):
        await Patience(budget=0)(flaky)

    assert 1 < flaky.calls < 1_000


async def test_reads_that_work_while_writes_fail_do_not_end_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a full disk reads still work: that is one outage, told once."""
    caplog.set_level(logging.INFO, logger="core.outages")
    patience = Patience("turns", budget=0)
    full = _Flaky(1_000, StoreUnavailable("the disk is full"))

    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            await patience(full)
        assert await patience(_Flaky(0, StoreError("unused")), read=True) == "ok"
    assert [r.levelno for r in caplog.records] == [logging.WARNING]

    assert await patience(_Flaky(0, StoreError("unused"))) == "ok"  # a write works again
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]
