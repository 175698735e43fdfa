"""`TypingRenewal` (channels/typing.py): renews until told, and never cancels a query."""

from __future__ import annotations

import asyncio

from channels.typing import TypingRenewal


async def test_a_stop_during_the_record_query_lets_the_query_finish() -> None:
    asking = asyncio.Event()
    answer = asyncio.Event()
    ended: list[str] = []
    shown: list[int] = []

    async def finished() -> bool:
        asking.set()
        try:
            await answer.wait()
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        ended.append("answered")
        return False

    async def show() -> None:
        shown.append(1)

    renewal = TypingRenewal(show, finished, interval=3600, limit=3600)
    await asyncio.wait_for(asking.wait(), 10)
    stopping = asyncio.create_task(renewal.stopped())
    await asyncio.sleep(0)  # `stopped` has asked; the query is still running
    assert not stopping.done()
    answer.set()
    await asyncio.wait_for(stopping, 10)
    assert ended == ["answered"]
    assert shown == []  # stopped before showing again
    assert renewal.done()


async def test_renews_until_the_reply_is_finished() -> None:
    shown: list[int] = []
    done = asyncio.Event()

    async def finished() -> bool:
        return len(shown) >= 3

    async def show() -> None:
        shown.append(1)
        if len(shown) == 3:
            done.set()

    renewal = TypingRenewal(show, finished, interval=0, limit=3600)
    await asyncio.wait_for(renewal.task, 10)
    assert len(shown) == 3
    assert done.is_set()


async def test_wait_first_waits_an_interval_and_a_stop_while_waiting_ends_it() -> None:
    shown: list[int] = []

    async def finished() -> bool:
        return False

    async def show() -> None:
        shown.append(1)

    renewal = TypingRenewal(show, finished, interval=3600, limit=3600, wait_first=True)
    await asyncio.sleep(0)
    await asyncio.wait_for(renewal.stopped(), 10)
    assert shown == []
    assert renewal.task.cancelled() is False
