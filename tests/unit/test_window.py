"""TurnWindow: fed a growing history step by step (and turn by turn), it sends exactly what a
fresh look at the whole history would."""

from __future__ import annotations

import random

from core.context import Sanitizer, sanitize, strip_old_images
from core.messages import ImagePart, Message, ToolCall
from core.window import TurnWindow

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def window(ready: Sanitizer | None = None) -> TurnWindow:
    return TurnWindow(
        store=None,  # type: ignore[arg-type]  # no compactor: the store is never used
        session_id="s",
        window_tokens=1_000_000,
        max_tokens=1000,
        fixed_tokens=0,
        summary=None,
        compactor=None,
        ready=ready,
    )


def random_history(rng: random.Random, length: int) -> list[Message]:
    """Messages of every shape, well-formed or not: calls without results, orphan results,
    results out of order, images."""
    history: list[Message] = []
    calls: list[ToolCall] = []
    for index in range(length):
        shape = rng.choice(["user", "image", "call", "result", "orphan", "text"])
        if shape == "user":
            history.append(Message.user(f"u{index}"))
        elif shape == "image":
            history.append(Message.user(f"i{index}", [ImagePart(media_type="image/png", data=PNG)]))
        elif shape == "call":
            calls = [ToolCall(id=f"c{index}-{n}", name="t", arguments={}) for n in range(2)]
            history.append(Message.assistant("", calls))
        elif shape == "result" and calls:
            history.append(Message.tool_result(calls.pop(rng.randrange(len(calls))), "ok"))
        elif shape == "orphan":
            orphan = ToolCall(id=f"x{index}", name="t", arguments={})
            history.append(Message.tool_result(orphan, "?"))
        else:
            history.append(Message.assistant(f"a{index}"))
    return history


def expected(history: list[Message]) -> list[tuple[str, str, str | None]]:
    return [_shape(m) for m in sanitize(strip_old_images(history))]


def _shape(message: Message) -> tuple[str, str, str | None]:
    return message.role, message.text, message.tool_call_id


def test_step_by_step_and_turn_by_turn_equal_a_fresh_look() -> None:
    rng = random.Random(7)
    for _ in range(200):
        history = random_history(rng, rng.randrange(1, 30))
        ready: Sanitizer | None = None
        view = window()
        for end in range(1, len(history) + 1):
            if rng.random() < 0.2:
                # A new turn: a new window that goes on from the previous turn's sanitizer.
                view = window(ready)
            sent = view.messages(history[:end])
            ready = view.ready
            assert [_shape(m) for m in sent] == expected(history[:end])


def test_a_sanitizer_of_another_history_is_not_trusted() -> None:
    first = [Message.user("one"), Message.assistant("two")]
    view = window()
    view.messages(first)
    # Same length and shape, other messages (e.g. reloaded from the store after a restart).
    other = [Message.user("three"), Message.assistant("four"), Message.user("five")]
    again = window(view.ready)

    assert [m.text for m in again.messages(other)] == ["three", "four", "five"]
