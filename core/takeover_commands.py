"""`/takeover ADDRESS [DURATION]` and `/handback ADDRESS [quiet]`: the takeover commands an
admin types in their own DM with the bot (`core/takeover.py`); anywhere else they are refused,
so a group never sees which chats a person answers in."""

from __future__ import annotations

from collections.abc import Sequence

from core.commands import ChatCommand, CommandContext, CommandInfo
from core.envelopes import Address
from core.takeover import DEFAULT_DURATION, Takeovers, parse_takeover_duration

__all__ = ["takeover_commands"]

_ONLY_IN_DM = "Use /{name} in your own direct chat with me."


def _target(words: list[str]) -> Address | str:
    """The chat the first word names, or why it names none."""
    try:
        return Address.parse(words[0])
    except ValueError as exc:
        return str(exc)


async def _takeover(context: CommandContext) -> str:
    if not context.inbound.is_direct:
        return _ONLY_IN_DM.format(name="takeover")
    words = context.args.split()
    if not 1 <= len(words) <= 2:
        return "Usage: /takeover PLATFORM:CHAT [DURATION], e.g. /takeover telegram:12345 2h."
    target = _target(words)
    if isinstance(target, str):
        return target
    try:
        duration = parse_takeover_duration(words[1]) if len(words) == 2 else DEFAULT_DURATION
    except ValueError as exc:
        return str(exc)
    by = f"{context.inbound.address.platform}:{context.inbound.user_id}"
    kept = await Takeovers(context.store).take_over(target, by=by, duration=duration)
    return (
        f"You have {kept.chat} until {kept.until:%Y-%m-%d %H:%M} UTC: I store what people write "
        f"there and answer nothing. Answer with `switchboard notify {kept.chat} TEXT` or the web "
        f"page; /handback {kept.chat} gives it back."
    )


async def _handback(context: CommandContext) -> str:
    if not context.inbound.is_direct:
        return _ONLY_IN_DM.format(name="handback")
    words = context.args.split()
    if not 1 <= len(words) <= 2 or (len(words) == 2 and words[1].lower() != "quiet"):
        return "Usage: /handback PLATFORM:CHAT [quiet]."
    target = _target(words)
    if isinstance(target, str):
        return target
    ended = await Takeovers(context.store).hand_back(target, quiet=len(words) == 2)
    if ended is None:
        return f"{target} was not taken over."
    return f"I answer in {ended.chat} again."


def takeover_commands() -> Sequence[ChatCommand]:
    """The admin-only takeover commands."""
    return (
        ChatCommand(
            CommandInfo(
                name="takeover",
                description="Answer a chat yourself: /takeover PLATFORM:CHAT [DURATION]",
                admin_only=True,
            ),
            _takeover,
        ),
        ChatCommand(
            CommandInfo(
                name="handback",
                description="Give a chat you took over back: /handback PLATFORM:CHAT",
                admin_only=True,
            ),
            _handback,
        ),
    )
