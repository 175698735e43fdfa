"""Which status reaction each delivery calls for (`channels/reactions.py`)."""

from __future__ import annotations

import logging

from channels.reactions import Emoji, ReactionStep, StatusReactions
from core.envelopes import Address, Outbound, OutboundKind

EMOJI = Emoji(taken="T", answered="A", failed="F")
ADDRESS = Address(platform="telegram", bot="b", chat="1")


def outbound(kind: OutboundKind, *, failed: bool = False, message: str | None = "7") -> Outbound:
    return Outbound(
        kind=kind,
        address=ADDRESS,
        reply_to="in-1",
        reply_to_platform_id=message,
        reply_key="telegram:b:1:7",
        failed=failed,
    )


def reactions(*, enabled: bool = True) -> StatusReactions:
    return StatusReactions("telegram", EMOJI, enabled=enabled, log=logging.getLogger("t"))


def test_a_turn_is_taken_then_answered_or_failed() -> None:
    marks = reactions()
    assert marks.step(outbound("typing")) == ReactionStep("7", None, "T", "taken")
    assert marks.step(outbound("reply")) == ReactionStep("7", "T", "A", "answered")
    assert marks.step(outbound("reply", failed=True)) == ReactionStep("7", "T", "F", "failed")
    # A turn a crash cut off ends in a failed notice.
    assert marks.step(outbound("notice", failed=True)) == ReactionStep("7", "T", "F", "failed")


def test_a_plain_notice_clears_only_a_taken_mark_put_here() -> None:
    marks = reactions()
    assert marks.step(outbound("notice")) is None  # a command's answer: no call
    marks.step(outbound("typing"))
    assert marks.step(outbound("notice")) == ReactionStep("7", "T", None, "cleared")
    assert marks.step(outbound("notice")) is None  # cleared once


def test_no_step_off_without_a_message_or_for_other_kinds() -> None:
    assert reactions(enabled=False).step(outbound("typing")) is None
    assert reactions().step(outbound("reply", message=None)) is None
    for kind in ("delta", "progress", "question", "notification", "decision"):
        assert reactions().step(outbound(kind)) is None, kind
