"""`switchboard events`: each lifecycle event as one line with the details its kind carries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bots.commands.processes import _print_events
from core.bus.base import BusPayload
from core.envelopes import EventEnvelope


class Played:
    """A subscription that plays the given envelopes, then ends."""

    def __init__(self, *envelopes: BusPayload) -> None:
        self.envelopes = envelopes

    async def __aiter__(self) -> AsyncIterator[BusPayload]:
        for envelope in self.envelopes:
            yield envelope

    async def aclose(self) -> None:
        """Nothing to leave."""


def event(name: str, **data: object) -> EventEnvelope:
    return EventEnvelope(
        name=name, session_id="s1", run_id="r1", session_key="telegram:bot:42", data=data
    )


async def test_retry_checkpoint_and_settled_lines_show_their_details(
    capsys: pytest.CaptureFixture[str],
) -> None:
    played = Played(
        event("retry.start", platform="telegram", attempt=2, wait_s=1.5, error_kind="overloaded"),
        event("retry.end", platform="telegram", attempts=2, outcome="succeeded"),
        event("checkpoint.saved", platform="telegram", run_key="k", tool_rounds=1),
        event("turn.settled", platform="telegram", run_id="r1", outcome="completed"),
    )

    await _print_events(played, as_json=False)

    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert [line.split() for line in lines] == [
        [
            "retry.start",
            "telegram:bot:42",
            "platform=telegram",
            "attempt=2",
            "wait_s=1.5",
            "error_kind=overloaded",
        ],
        ["retry.end", "telegram:bot:42", "platform=telegram", "attempts=2", "outcome=succeeded"],
        ["checkpoint.saved", "telegram:bot:42", "platform=telegram", "tool_rounds=1"],
        ["turn.settled", "telegram:bot:42", "platform=telegram", "outcome=completed"],
    ]


async def test_a_sub_agents_lines_name_the_turn_that_delegated_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    played = Played(
        event("agent.run.start", platform="telegram", depth=1, parent_run_id="p1"),
        event("agent.run.start", platform="telegram"),
    )

    await _print_events(played, as_json=False)

    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert [line.split() for line in lines] == [
        ["agent.run.start", "telegram:bot:42", "platform=telegram", "depth=1", "parent_run_id=p1"],
        ["agent.run.start", "telegram:bot:42", "platform=telegram"],
    ]
