"""What a stopped answer shows, and which inbound work is a stop request."""

from __future__ import annotations

from core.envelopes import Address, Inbound
from core.stopping import STOP_BUTTON, is_stop, stop_inbound, stopped_text

CHAT = Address(platform="telegram", bot="1", chat="5")


def test_a_stopped_answer_keeps_its_text_and_says_it_was_stopped() -> None:
    assert stopped_text("Once upon a time  \n") == "Once upon a time\n\n— stopped"


def test_an_open_code_block_is_closed_before_the_stopped_line() -> None:
    assert (
        stopped_text("Try:\n```python\nprint(1)") == "Try:\n```python\nprint(1)\n```\n\n— stopped"
    )


def test_nothing_said_yet_is_just_stopped() -> None:
    assert stopped_text(" \n") == "Stopped."


def test_stop_requests_are_the_command_the_button_and_a_cancel() -> None:
    command = Inbound(kind="command", command="STOP", address=CHAT, text="/stop")
    other = Inbound(kind="command", command="cost", address=CHAT, text="/cost")
    press = stop_inbound(STOP_BUTTON, address=CHAT, user_id="5", user_name="Ann")
    assert press is not None and press.kind == "cancel" and press.mentions_bot
    assert stop_inbound("sbq:abc:yes", address=CHAT, user_id="5", user_name="Ann") is None
    assert [is_stop(i) for i in (command, other, press)] == [True, False, True]
