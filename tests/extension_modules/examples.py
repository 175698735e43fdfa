"""The example of docs/extensions.md, run by tests/unit/test_extensions.py."""

from __future__ import annotations

from core.extensions import ContextEvent, ContextResult, ExtensionContext

KEEP = 6
COMPACT_AFTER_TOKENS = 50_000


def keep_recent(event: ContextEvent, ctx: ExtensionContext) -> ContextResult | None:
    """context: send at most the last KEEP messages (from a person's message on, so no tool
    result loses its call); ask for compaction once the turn has read many tokens."""
    if ctx.usage.input_tokens > COMPACT_AFTER_TOKENS:
        ctx.request_compaction()
    if len(event.messages) <= KEEP:
        return None
    recent = event.messages[-KEEP:]
    while recent and recent[0].role != "user":
        recent = recent[1:]
    if not recent:  # one long tool round: leave the request as it is
        return None
    return ContextResult(messages=recent)
