"""A store write that lands but whose answer is lost (the connection drops after the commit)
is tried again by the turn, and is kept once: the message and the cost entry carry their own
ids (`Message.id`, `CostEntry.id`), by which the SQL store recognises the second try.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore
from core.errors import StoreUnavailable
from core.events import RunCompleted
from core.fencing import Fence
from core.messages import Message, Usage
from core.modes import FULL
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply
from core.runtime import AgentRuntime, ChannelContext
from core.store.turns import TurnClose, TurnOpening, TurnStart
from core.tools import ToolRegistry

SESSION_KEY = "terminal:default:lost"


class _LostAnswers(SqlStore):
    """Opens the first turn and closes its first step with an answer, then raises as if the
    reply was lost each time."""

    lose_opening = True
    lose_close = True

    async def open_turn(self, opening: TurnOpening, *, fence: Fence | None = None) -> TurnStart:
        start = await super().open_turn(opening, fence=fence)
        if self.lose_opening:
            self.lose_opening = False
            raise StoreUnavailable("SQL store could not open a turn: connection lost")
        return start

    async def close_turn(self, closing: TurnClose, *, fence: Fence | None = None) -> list[Message]:
        stored = await super().close_turn(closing, fence=fence)
        if self.lose_close and any(m.role == "assistant" for m in closing.messages):
            self.lose_close = False
            raise StoreUnavailable("SQL store could not close a step: connection lost")
        return stored


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[_LostAnswers]:
    if request.param == "postgresql":
        url = await request.getfixturevalue("postgres_server").new_database()
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'records.db'}"
    opened = await _LostAnswers.open(url)
    assert isinstance(opened, _LostAnswers)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_message_an_answer_and_a_cost_whose_acknowledgement_was_lost_are_kept_once(
    store: _LostAnswers,
) -> None:
    session = await store.current_session(SESSION_KEY)
    provider = ScriptedProvider([text_reply("Hello!", usage=Usage(input_tokens=3))])
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([]),
        store=store,
        cost=lambda _model, _usage: 0.5,
    )
    context = ChannelContext(platform="terminal", mode=FULL, session_key=SESSION_KEY)

    events = [e async for e in runtime.run(session.id, Message.user("hi"), context)]

    assert isinstance(events[-1], RunCompleted) and events[-1].text == "Hello!"
    assert not store.lose_opening and not store.lose_close  # both were tried twice
    assert [m.text for m in await store.list_messages(session.id)] == ["hi", "Hello!"]
    summary = await store.cost_summary(session.id)
    assert (summary.calls, summary.cost_usd) == (1, 0.5)
