"""`cancel_and_wait`: a background task ends even when it swallows a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from core.tasks import cancel_and_wait


async def test_a_task_that_swallows_the_first_cancellation_is_cancelled_again() -> None:
    swallowed = 0
    started = asyncio.Event()

    async def stubborn() -> None:
        # What asyncio.wait_for does on Python 3.11 when the cancellation and the result
        # arrive together: the cancellation is lost and the task carries on.
        nonlocal swallowed
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed += 1
        await asyncio.Event().wait()

    task = asyncio.create_task(stubborn())
    await started.wait()
    await cancel_and_wait(task)
    assert task.cancelled()
    assert swallowed == 1


async def test_an_error_the_task_ended_with_is_raised() -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(broken())
    await asyncio.wait({task})
    with pytest.raises(RuntimeError, match="boom"):
        await cancel_and_wait(task)


async def test_a_finished_task_is_left_as_it_is() -> None:
    async def done() -> int:
        return 1

    task = asyncio.create_task(done())
    await task
    await cancel_and_wait(task)
    assert task.result() == 1
