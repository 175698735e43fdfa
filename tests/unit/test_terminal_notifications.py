"""Scheduled messages in the terminal: a labelled block between turns, never inside an answer."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from channels.terminal import NOTIFICATION_LABEL, TerminalAdapter
from core.envelopes import Address, Inbound, Outbound

ANY = Address(platform="terminal", bot="local", chat="any")


def adapter_for(stdin: str, printed: io.StringIO, *, interactive: bool = False) -> TerminalAdapter:
    return TerminalAdapter(
        chat="c",
        interactive=interactive,
        stdin=io.StringIO(stdin),
        console=Console(file=printed, highlight=False, width=200),
        menu=(),
    )


def notification(text: str) -> Outbound:
    return Outbound(kind="notification", address=ANY, text=text)


async def test_one_that_comes_during_a_turn_waits_for_the_answer() -> None:
    printed = io.StringIO()
    adapter = adapter_for("what is 2+3?\n", printed)

    async def worker(inbound: Inbound) -> None:
        # The scheduled answer arrives first, while the person's turn is running.
        await adapter.deliver(notification("Stand-up in 5 minutes."))
        assert printed.getvalue() == ""
        reply = Outbound(
            kind="reply", address=inbound.address, text="The answer is 5.", reply_to=inbound.id
        )
        asyncio.get_running_loop().call_soon(asyncio.ensure_future, adapter.deliver(reply))

    await asyncio.wait_for(adapter.run(worker), 5)

    assert printed.getvalue() == (
        f"The answer is 5.\n{NOTIFICATION_LABEL}\nStand-up in 5 minutes.\n"
    )


async def test_one_that_comes_between_turns_is_shown_at_once_with_its_label() -> None:
    printed = io.StringIO()
    adapter = adapter_for("", printed)

    await adapter.deliver(notification("Backup finished.\nAll 3 disks OK."))

    assert printed.getvalue() == f"{NOTIFICATION_LABEL}\nBackup finished.\nAll 3 disks OK.\n"


async def test_an_interactive_answer_being_streamed_is_not_interrupted() -> None:
    printed = io.StringIO()
    adapter = adapter_for("", printed, interactive=True)

    async def worker(inbound: Inbound) -> None:
        def piece(text: str, seq: int) -> Outbound:
            return Outbound(
                kind="delta",
                address=inbound.address,
                text=text,
                seq=seq,
                reply_to=inbound.id,
                reply_key=inbound.dedupe_key,
            )

        await adapter.deliver(piece("Hel", 1))
        await adapter.deliver(notification("Reminder!"))
        await adapter.deliver(piece("Hello there", 2))
        final = Outbound(
            kind="reply",
            address=inbound.address,
            text="Hello there",
            seq=3,
            reply_to=inbound.id,
            reply_key=inbound.dedupe_key,
        )
        asyncio.get_running_loop().call_soon(asyncio.ensure_future, adapter.deliver(final))

    # One turn as `run` sends each line (an interactive `run` reads the real keyboard).
    await asyncio.wait_for(adapter._send(worker, adapter._inbound("hello")), 5)

    shown = printed.getvalue()
    assert "Hello there" in shown and NOTIFICATION_LABEL in shown
    assert shown.index("Hello there") < shown.index(NOTIFICATION_LABEL)
    assert shown.endswith(f"{NOTIFICATION_LABEL}\nReminder!\n")


async def test_a_piped_chat_waits_before_leaving_and_shows_what_comes_meanwhile() -> None:
    printed = io.StringIO()
    due = asyncio.Event()
    shown: list[str] = []

    async def before_leaving() -> None:
        # What the chat waits for: a reminder due by the end of input, answered after it.
        due.set()
        await adapter.deliver(notification("Take the bread out!"))
        shown.append(printed.getvalue())

    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO(""),
        console=Console(file=printed, highlight=False, width=200),
        menu=(),
        before_leaving=before_leaving,
    )

    async def nobody(inbound: Inbound) -> None:
        raise AssertionError(f"no turn was typed: {inbound}")

    await asyncio.wait_for(adapter.run(nobody), 5)

    assert due.is_set()
    assert shown == [f"{NOTIFICATION_LABEL}\nTake the bread out!\n"]


async def test_a_chat_told_to_stop_leaves_without_waiting() -> None:
    waited: list[bool] = []

    async def before_leaving() -> None:
        waited.append(True)

    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO(""),
        console=Console(file=io.StringIO(), highlight=False, width=200),
        menu=(),
        before_leaving=before_leaving,
    )
    await adapter.stop()

    async def nobody(inbound: Inbound) -> None:
        raise AssertionError(f"no turn was typed: {inbound}")

    await asyncio.wait_for(adapter.run(nobody), 5)

    assert waited == []
