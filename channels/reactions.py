"""Status reactions: a mark on the person's message while its turn runs and once it is over.

The adapters of Telegram, Slack and Discord put the *taken* reaction (👀) on a message when
the worker starts its turn (the `typing` delivery, which also starts the typing indicator),
and replace it with *answered* (✅) or *failed* (⚠️) when the turn's final `reply` is shown;
a failed notice (a turn a crash cut off) gets *failed*, another notice (a cancelled turn)
takes *taken* away. Everything here is platform-neutral: which step a delivery calls for, and
how a refused reaction is logged. The calls themselves are the adapters'.

A reaction is decoration: one that fails (a missing permission, a message too old, an emoji
the chat does not allow) is logged and never stops the answer.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from core.envelopes import Outbound

__all__ = ["Emoji", "ReactionStep", "StatusReactions"]

_REMEMBERED = 10_000  # messages whose taken reaction this process put, kept in memory


@dataclass(frozen=True)
class Emoji:
    """The three reactions in the platform's own spelling (Slack: names, others: emoji)."""

    taken: str
    answered: str
    failed: str


@dataclass(frozen=True)
class ReactionStep:
    """What to do on `message` (the platform's message id): take `remove` off (the taken
    reaction, when it may be there), then put `add` on (None: nothing new)."""

    message: str
    remove: str | None
    add: str | None
    status: str  # taken, answered, failed or cleared: for the log


class StatusReactions:
    """Which reaction each delivery calls for on one platform, and a log of refusals.

    `enabled` False (the profile's `reactions = false`): no step at all.
    """

    def __init__(self, platform: str, emoji: Emoji, *, enabled: bool, log: logging.Logger) -> None:
        self.platform = platform
        self.emoji = emoji
        self.enabled = enabled
        self._log = log
        self._taken: OrderedDict[str, None] = OrderedDict()
        self._refusals: set[str] = set()

    def step(self, outbound: Outbound) -> ReactionStep | None:
        """The reaction change `outbound` calls for on the message it answers; None if none.

        Only deliveries answering a person's message (with its platform id) have one. The
        answered and failed steps take the taken reaction off whichever gateway put it there
        (taking off a reaction that is not there is harmless); clearing after a plain notice
        happens only where this process put it, so command answers cost no call.
        """
        message = outbound.reply_to_platform_id
        if not self.enabled or message is None:
            return None
        emoji = self.emoji
        match outbound.kind:
            case "typing":
                self._remember(outbound.record_key)
                return ReactionStep(message, None, emoji.taken, "taken")
            case "reply" if not outbound.failed:
                self._taken.pop(outbound.record_key, None)
                return ReactionStep(message, emoji.taken, emoji.answered, "answered")
            case "reply" | "notice" if outbound.failed:
                self._taken.pop(outbound.record_key, None)
                return ReactionStep(message, emoji.taken, emoji.failed, "failed")
            case "notice" if outbound.record_key in self._taken:
                self._taken.pop(outbound.record_key)
                return ReactionStep(message, emoji.taken, None, "cleared")
        return None

    def refused(self, step: ReactionStep, reason: object) -> None:
        """Log a reaction the platform refused: a warning the first time for each reason, then
        at debug level (a missing permission would otherwise log every message)."""
        text = str(reason)
        first = text not in self._refusals
        if first and len(self._refusals) < 100:
            self._refusals.add(text)
        self._log.log(
            logging.WARNING if first else logging.DEBUG,
            "could not set the %s reaction on a %s message (%s); answers go on without it",
            step.status,
            self.platform,
            text,
        )

    def _remember(self, key: str) -> None:
        self._taken[key] = None
        self._taken.move_to_end(key)
        if len(self._taken) > _REMEMBERED:
            self._taken.popitem(last=False)
