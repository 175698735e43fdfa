"""System prompt assembly.

The prompt is built from parts in a fixed order (identity, capability-mode rules, platform
hint, footer) and is byte-identical across the turns of a session on the same day, so provider
prompt caches keep hitting.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from core.modes import CapabilityMode

__all__ = ["DEFAULT_IDENTITY", "SystemPrompt"]

DEFAULT_IDENTITY = (
    "You are Switchboard, a helpful assistant that talks with people in chat apps. "
    "Be concise and accurate, and say so when you do not know."
)


class SystemPrompt(BaseModel):
    """Builds the system prompt for one turn from the profile's identity text."""

    model_config = ConfigDict(frozen=True)

    identity: str = DEFAULT_IDENTITY

    def build(
        self,
        *,
        mode: CapabilityMode,
        platform_hint: str,
        session_id: str,
        now: datetime,
    ) -> str:
        """The assembled prompt; only the date (not the time) varies, to keep caches warm."""
        parts = [self.identity.strip(), f"## Capabilities\n{mode.prompt_rules.strip()}"]
        if platform_hint.strip():
            parts.append(f"## Formatting\n{platform_hint.strip()}")
        parts.append(f"Today is {now:%A %d %B %Y} (UTC). Session: {session_id}.")
        return "\n\n".join(parts)
