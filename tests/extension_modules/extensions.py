"""Extensions for the tests: each changes one thing, asks one thing of the turn, or misbehaves."""

from __future__ import annotations

import asyncio

from core.extensions import (
    AgentStartEvent,
    AgentStartResult,
    ContextEvent,
    ContextResult,
    ExtensionContext,
    InputEvent,
    InputResult,
)
from core.messages import Message

# What the recording extensions saw, in order (tests clear it).
SEEN: list[object] = []
# What a `context` extension read of the turn's usage, per call.
USAGE: list[int] = []


def shout(event: InputEvent, ctx: ExtensionContext) -> InputResult:
    """Sync: the person's text in capitals."""
    return InputResult(text=event.text.upper())


async def answer_ping(event: InputEvent, ctx: ExtensionContext) -> InputResult | None:
    """Async: answers "ping" itself, with no model call; leaves anything else."""
    if event.text.strip().lower() == "ping":
        return InputResult(reply="pong (from an extension)")
    return None


def pirate(event: AgentStartEvent, ctx: ExtensionContext) -> AgentStartResult:
    """Replaces the system prompt for the turn."""
    return AgentStartResult(system="You are a pirate.")


def sign_off(event: AgentStartEvent, ctx: ExtensionContext) -> AgentStartResult:
    """Adds to the system prompt."""
    return AgentStartResult(append="Sign every answer with -- the bot.")


def last_message_only(event: ContextEvent, ctx: ExtensionContext) -> ContextResult:
    """Sends only the newest message, with a note of how many were left out."""
    USAGE.append(ctx.usage.input_tokens)
    left_out = len(event.messages) - 1
    newest = event.messages[-1]
    return ContextResult(
        messages=[Message.user(f"({left_out} earlier messages left out) {newest.text}")]
    )


def record(event: InputEvent | AgentStartEvent | ContextEvent, ctx: ExtensionContext) -> None:
    """Changes nothing; writes the event down."""
    SEEN.append(event)


def abort_turn(event: AgentStartEvent, ctx: ExtensionContext) -> None:
    """Ends the turn before the model is asked."""
    ctx.abort("the operator's extension said no")


def compact_first(event: InputEvent, ctx: ExtensionContext) -> None:
    """Asks for the session to be compacted before the turn's first model call."""
    ctx.request_compaction()


def compact_after(event: ContextEvent, ctx: ExtensionContext) -> None:
    """Asks for compaction from the context event (before the next call, or after the turn)."""
    ctx.request_compaction()


def reload_profile(event: InputEvent, ctx: ExtensionContext) -> None:
    """Asks for the profile to be reloaded."""
    ctx.reload()


def raises(event: InputEvent, ctx: ExtensionContext) -> None:
    """Fails with a message quoting a secret."""
    raise RuntimeError("broke on sk-ant-api03-" + "x" * 40)


def wrong_answer(event: InputEvent, ctx: ExtensionContext) -> str:
    """Answers a string, not an `InputResult`."""
    return "replace it"


def wrong_point(event: AgentStartEvent, ctx: ExtensionContext) -> InputResult:
    """Answers another point's result type."""
    return InputResult(text="nope")


async def hangs(event: InputEvent, ctx: ExtensionContext) -> None:
    """Never answers (its timeout ends it)."""
    await asyncio.Event().wait()


def one_argument(event: InputEvent) -> None:
    """Takes the event only: not an extension."""
