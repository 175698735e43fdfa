"""The terminal answers a mid-turn question (a confirmation) from its next input line."""

from __future__ import annotations

import io

from rich.console import Console

from channels.terminal import TerminalAdapter
from core.envelopes import Address, Inbound, Outbound


async def test_a_question_is_shown_and_the_next_line_goes_back_as_the_answer() -> None:
    printed = io.StringIO()
    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO("yes\n"),
        console=Console(file=printed, highlight=False),
        menu=(),
    )
    sent: list[Inbound] = []

    async def sink(inbound: Inbound) -> None:
        sent.append(inbound)

    adapter._sink = sink  # as `run` sets it
    question = Outbound(
        kind="question",
        address=Address(platform="terminal", bot="local", chat="c"),
        text="I'd like to run wipe(). Reply yes to allow or no to refuse (60 s).",
    )

    assert not question.ends_turn
    await adapter.deliver(question)

    assert "Reply yes to allow" in printed.getvalue()
    assert [(i.text, i.user_id, i.address.chat) for i in sent] == [("yes", "local", "c")]


async def test_no_line_means_no_answer() -> None:
    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO(""),
        console=Console(file=io.StringIO()),
        menu=(),
    )
    sent: list[Inbound] = []

    async def sink(inbound: Inbound) -> None:
        sent.append(inbound)

    adapter._sink = sink
    await adapter.deliver(
        Outbound(kind="question", address=Address(platform="terminal", chat="c"), text="ok?")
    )

    assert sent == []
