"""Stopping a running turn from its chat: `/stop`, a Stop button, the web page's and the
terminal's cancel.

A stop request must reach the turn while it runs, on whichever worker runs it, so whoever
accepts one publishes it on the `control` topic (`core/mailbox/intake.py`); the worker
running the chat's turn checks who asks (the person whose turn it is, or an admin) and stops
it. A `/stop` command also waits in the session's mailbox like any command: the worker
that stops a turn marks it processed first, so that copy is skipped; reached with nothing
stopped, it answers that there was nothing to stop. A button press (kind `cancel`) goes only
to the control topic: its button is gone once the answer has ended.

A stopped answer keeps what it said so far, with a last line saying it was stopped
(`stopped_text`), where the platform shows a reply's final text in place of its pieces.
"""

from __future__ import annotations

from core.envelopes import Address, Inbound

__all__ = [
    "NOTHING_TO_STOP",
    "NOT_YOURS",
    "STOPPED",
    "STOP_BUTTON",
    "STOP_COMMAND",
    "STOP_LABEL",
    "is_stop",
    "is_stop_command",
    "stop_inbound",
    "stopped_text",
]

STOP_COMMAND = "stop"
# What the Stop button carries back (Telegram callback data, Slack action value, Discord
# custom id): short, and apart from the confirmation buttons' `sbq:` values.
STOP_BUTTON = "sbstop"
STOP_LABEL = "Stop"
STOPPED = "Stopped."
NOTHING_TO_STOP = "Nothing to stop."
NOT_YOURS = "Only the person who asked, or an admin, can stop this answer."
# The last line of an answer that was stopped.
_STOPPED_LINE = "— stopped"
_FENCE = "```"


def is_stop_command(inbound: Inbound) -> bool:
    """Whether `inbound` is a `/stop` typed in the chat (or a platform's slash command)."""
    return inbound.kind == "command" and (inbound.command or "").lower() == STOP_COMMAND


def is_stop(inbound: Inbound) -> bool:
    """Whether `inbound` asks to stop its chat's running turn (a command, a button, a cancel)."""
    return inbound.kind == "cancel" or is_stop_command(inbound)


def stop_inbound(
    value: str,
    *,
    address: Address,
    user_id: str,
    user_name: str,
    is_direct: bool = False,
    team: str | None = None,
) -> Inbound | None:
    """The `cancel` Inbound of a Stop button press; None when the button pressed is not the
    Stop button. It has no platform message id (a press is no message to quote): a press
    seen twice is two requests, and the second finds nothing left to stop."""
    if value != STOP_BUTTON:
        return None
    return Inbound(
        kind="cancel",
        address=address,
        user_id=user_id,
        user_name=user_name,
        is_direct=is_direct,
        mentions_bot=True,
        team=team,
    )


def stopped_text(partial: str) -> str:
    """What a stopped answer shows: its text so far and a last line saying it was stopped
    (an open code block closed first), or `Stopped.` when nothing was said yet."""
    text = partial.rstrip()
    if not text:
        return STOPPED
    if text.count(_FENCE) % 2:
        text += f"\n{_FENCE}"
    return f"{text}\n\n{_STOPPED_LINE}"
