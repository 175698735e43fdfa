"""`ChannelPolicy`: which capability mode a chat gets, and limits on what users may send."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.envelopes import Inbound

__all__ = ["DEFAULT_CHANNEL_MODES", "ChannelPolicy"]

DEFAULT_CHANNEL_MODES: dict[str, str] = {
    "terminal": "full",
    "web": "full",
    "telegram": "safe-chat",
    "slack": "safe-chat",
    "discord": "discord",
}


class ChannelPolicy(BaseModel):
    """Per-platform and per-chat capability modes, decided by the worker, never the gateway."""

    model_config = ConfigDict(frozen=True)

    modes: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_CHANNEL_MODES))
    # Overrides for one chat, keyed by session key prefix `<platform>:<bot>:<chat>`.
    chat_modes: dict[str, str] = Field(default_factory=dict)
    default_mode: str = "safe-chat"
    max_input_chars: int = Field(default=20_000, ge=1)

    def mode_for(self, inbound: Inbound) -> str:
        """The name of the capability mode for this message's chat."""
        address = inbound.address
        chat_key = f"{address.platform}:{address.bot}:{address.chat}"
        if chat_key in self.chat_modes:
            return self.chat_modes[chat_key]
        return self.modes.get(address.platform, self.default_mode)
