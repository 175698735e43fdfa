"""The bounded event buffer between a turn and its consumer (`stream_buffer_size`).

A consumer that stops reading holds the turn at the bound: the model's stream is read no
further than the buffer has room for. Shown with events and counts, never with time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.event_buffer import EventBuffer
from core.events import Finished, ModelEvent, Progress, RunCompleted, RunStarted, TextDelta
from core.messages import Message
from core.modes import FULL
from core.providers import ModelRequest
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import ToolRegistry

PIECES = 1000


def progress(step: int) -> Progress:
    return Progress(step=step, message=f"step {step}")


async def test_room_waits_at_the_bound_until_the_consumer_reads() -> None:
    buffer = EventBuffer(2)
    buffer.put(progress(1))
    await buffer.room()  # one waiting: there is room
    buffer.put(progress(2))
    waiting = asyncio.create_task(buffer.room())
    read = asyncio.create_task(buffer.get())

    await waiting  # ends only because `read` took one event out

    assert read.done()
    assert read.result() == progress(1)
    assert len(buffer) == 1


async def test_events_come_out_in_order_and_none_ends_them() -> None:
    buffer = EventBuffer(1)
    for step in range(3):
        buffer.put(progress(step))
    buffer.put(None)

    got = [await buffer.get() for _ in range(4)]

    assert got == [progress(0), progress(1), progress(2), None]


def test_a_buffer_needs_room_for_one_event() -> None:
    with pytest.raises(ValueError, match="at least one event"):
        EventBuffer(0)


class Counting:
    """A model streaming `PIECES` deltas as fast as it is read, counting what was read."""

    name = "counting"

    def __init__(self) -> None:
        self.pulled = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for index in range(PIECES):
            self.pulled += 1
            yield TextDelta(text=f"{index} ")
        yield Finished()

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_a_consumer_that_stops_reading_holds_the_model_stream_at_the_bound(
    store: SqlStore, session_id: str
) -> None:
    provider = Counting()
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry(),
        store=store,
        limits=RuntimeLimits(stream_buffer_size=8),
    )
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    events = runtime.run(session_id, Message.user("count"), context)

    assert isinstance(await anext(events), RunStarted)
    first = await anext(events)  # the turn ran until the buffer filled, then waited

    assert first == TextDelta(text="0 ")
    # Read so far: what the buffer holds, the piece read, and the one in hand (unbounded,
    # the model's whole answer would have been read into memory by now).
    assert provider.pulled <= 8 + 2
    rest = [event async for event in events]
    assert isinstance(rest[-1], RunCompleted)
    assert rest[-1].text == "".join(f"{i} " for i in range(PIECES))
    assert provider.pulled == PIECES
