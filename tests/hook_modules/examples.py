"""The example hooks of docs/hooks.md, as an operator would write them (kept in step with the
page; tests/unit/test_tool_hooks.py and tests/unit/test_tool_rounds.py run them)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from core.tool_hooks import HookDecision, ToolCallEvent, ToolResultEvent

BLOCKED_DOMAINS = {"example.org", "internal.example.com"}


def block_domains(event: ToolCallEvent) -> HookDecision | None:
    """before_tool: `web_fetch` may not fetch from the blocked domains (or their subdomains)."""
    if event.tool != "web_fetch":
        return None
    host = (urlsplit(str(event.arguments.get("url", ""))).hostname or "").lower()
    if any(host == d or host.endswith("." + d) for d in BLOCKED_DOMAINS):
        return HookDecision.deny(f"Fetching from {host} is not allowed here; do not retry it.")
    return None


EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")


async def hide_emails(event: ToolResultEvent) -> HookDecision | None:
    """after_tool: email addresses in any tool's result are replaced, with a note saying so."""
    hidden, count = EMAIL.subn("[email]", event.result)
    if count == 0:
        return None
    return HookDecision(
        result=hidden,
        message=f"{count} email address(es) were hidden by policy; do not ask for them.",
    )


def end_after_ticket(event: ToolResultEvent) -> HookDecision | None:
    """after_tool: once `file_ticket` worked, the person gets its result and the turn ends
    (no model call to say "I filed your ticket")."""
    if event.tool != "file_ticket" or event.is_error:
        return None
    return HookDecision.end(f"Filed: {event.result}. We will get back to you here.")
