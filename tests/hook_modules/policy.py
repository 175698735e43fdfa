"""Tool hooks for the tests: each one decides one way, sync or async, or misbehaves."""

from __future__ import annotations

import asyncio
from typing import Any

from core.tool_hooks import HookDecision, ToolCallEvent, ToolResultEvent

# The events the recording hooks saw, in order (tests clear it).
SEEN: list[ToolCallEvent] = []

NOT_CALLABLE = 3


def deny_echo(event: ToolCallEvent) -> HookDecision | None:
    """Sync: blocks the `echo` tool, allows the rest."""
    if event.tool == "echo":
        return HookDecision.deny("echo is switched off here by the operator.")
    return None


async def deny_echo_async(event: ToolCallEvent) -> HookDecision | None:
    """Async: the same as `deny_echo`."""
    await asyncio.sleep(0)
    return deny_echo(event)


def record(event: ToolCallEvent) -> None:
    """Allows everything and writes the event down."""
    SEEN.append(event)


def shout(event: ToolCallEvent) -> HookDecision:
    """Patches the `text` argument to upper case."""
    return HookDecision.patch_arguments(
        {**event.arguments, "text": event.arguments["text"].upper()}
    )


async def exclaim(event: ToolCallEvent) -> HookDecision:
    """Async: patches the `text` argument, adding an exclamation mark."""
    return HookDecision.patch_arguments({**event.arguments, "text": event.arguments["text"] + "!"})


def bad_patch(event: ToolCallEvent) -> HookDecision:
    """Patches the arguments into ones no tool here takes."""
    return HookDecision.patch_arguments({"text": 5, "extra": True})


def note(event: ToolCallEvent) -> HookDecision:
    """Adds a note for the model."""
    return HookDecision.note(f"the operator watches {event.tool}")


def redact_result(event: ToolResultEvent) -> HookDecision:
    """After: replaces digits in the result."""
    return HookDecision.patch_result("".join("#" if c.isdigit() else c for c in event.result))


async def bracket_result(event: ToolResultEvent) -> HookDecision:
    """Async, after: wraps the result in brackets."""
    return HookDecision.patch_result(f"[{event.result}]")


def withhold_result(event: ToolResultEvent) -> HookDecision:
    """After: blocks the result."""
    return HookDecision.deny("the result is withheld")


def raises(event: ToolCallEvent) -> None:
    """Fails with a message carrying a secret."""
    raise RuntimeError(
        "could not reach policy server with key sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    )


async def hangs(event: ToolCallEvent) -> None:
    """Never answers (until its timeout cancels it)."""
    await asyncio.Event().wait()


def junk(event: ToolCallEvent) -> Any:
    """Answers something that is not a decision."""
    return "yes"


def two_arguments(event: ToolCallEvent, extra: str) -> None:
    """Takes one argument too many."""


class Counter:
    """A callable object with an async `__call__`: counts the calls, allows them."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, event: ToolCallEvent) -> None:
        self.calls += 1


COUNTER = Counter()


def deny_calculator(event: ToolCallEvent) -> HookDecision | None:
    """Blocks the built-in `calculator` tool."""
    if event.tool == "calculator":
        return HookDecision.deny("The calculator is off; work it out in your head.")
    return None


def end_with_answer(event: ToolResultEvent) -> HookDecision | None:
    """After: ends the turn when `finish` ran, with an answer of its own (carrying a secret,
    which the person must not see)."""
    if event.tool == "finish":
        return HookDecision.end(f"All done: {event.result}. key sk-proj-abcdefghijklmnopqrstu012")
    return None


def end_with_result(event: ToolResultEvent) -> HookDecision:
    """After: ends the turn with the result as the answer."""
    return HookDecision.end()


def end_before(event: ToolCallEvent) -> HookDecision:
    """Before: asks to end the turn before the tool ran (ignored)."""
    return HookDecision.end("too early")
