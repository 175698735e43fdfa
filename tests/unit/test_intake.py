"""`accept_inbound`: which work goes in its session's mailbox and which on the control topic."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.bus.base import Subscription
from core.bus.names import CONTROL
from core.envelopes import Address, Inbound
from core.mailbox.intake import accept_inbound
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import take_waiting

CHAT = Address(platform="telegram", bot="b", chat="42")


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def _where(inbound: Inbound, bus: MemoryBus) -> tuple[list[str], list[str]]:
    """The ids `inbound` left in the mailboxes and on the control topic once handed in."""
    mailboxes = MemoryMailboxes()
    control: Subscription = await bus.subscribe(CONTROL)
    try:
        await accept_inbound(inbound, mailboxes=mailboxes, bus=bus)
        published: list[str] = []
        await bus.publish(CONTROL, Inbound(address=CHAT, text="end of the test's look"))
        async for envelope in control:
            assert isinstance(envelope, Inbound)
            if envelope.text == "end of the test's look":
                break
            published.append(envelope.id)
    finally:
        await control.aclose()
    return [waiting.id for waiting in await take_waiting(mailboxes)], published


async def test_a_message_goes_into_its_mailbox_only(bus: MemoryBus) -> None:
    message = Inbound(address=CHAT, user_id="7", text="hello", is_direct=True)
    assert await _where(message, bus) == ([message.id], [])


async def test_a_cancel_and_a_button_press_go_on_the_control_topic_only(bus: MemoryBus) -> None:
    cancel = Inbound(kind="cancel", address=CHAT, user_id="7")
    press = Inbound(kind="answer", address=CHAT, user_id="7", text="yes", question="q1")
    assert await _where(cancel, bus) == ([], [cancel.id])
    assert await _where(press, bus) == ([], [press.id])


async def test_a_stop_and_a_typed_yes_go_into_the_mailbox_and_on_the_control_topic(
    bus: MemoryBus,
) -> None:
    stop = Inbound(kind="command", command="stop", text="/stop", address=CHAT, user_id="7")
    yes = Inbound(address=CHAT, user_id="7", text="yes", is_direct=True)
    assert await _where(stop, bus) == ([stop.id], [stop.id])
    assert await _where(yes, bus) == ([yes.id], [yes.id])
