"""The web page's `ChannelSpec` and settings.

The page is the operator's own console, like the terminal: its chats run in `full` mode and
its one user is an operator. `switchboard serve` and `switchboard web` build the adapter
themselves (it needs the store and the bus, not only its variables), so `build` is None.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from channels.base import ChannelSpec
from core.addresses import AddressGrammar

__all__ = ["BOT", "ENV", "MIN_TOKEN_LENGTH", "PROMPT_HINT", "SPEC", "USER", "WebSettings"]

PROMPT_HINT = (
    "Replies are shown on a web page that renders Markdown (headings, lists, tables, code "
    "blocks and links); raw HTML is shown as text."
)

# Every web conversation belongs to this bot and this person: whoever holds the token.
BOT = "local"
USER = "operator"

# A shorter token is guessable and too short for the log scrubber to recognise.
MIN_TOKEN_LENGTH: Final = 16

# The variables of the page, by field of `WebSettings`.
ENV = {
    "host": "SWITCHBOARD_WEB_HOST",
    "port": "SWITCHBOARD_WEB_PORT",
    "token": "SWITCHBOARD_WEB_TOKEN",
}

SPEC = ChannelSpec(
    name="web",
    prompt_hint=PROMPT_HINT,
    default_mode="full",
    address=AddressGrammar(platform="web", usage="web:<conversation>", chat=r"[A-Za-z0-9_-]{1,64}"),
    build=None,
    env=(ENV["port"], ENV["host"], ENV["token"]),
    secret_env=(ENV["token"],),
    # The page redraws the answer as it grows; a fifth of a second keeps it lively.
    stream_interval=0.2,
    shows_progress=True,
    operators=(USER,),
)


class WebSettings(BaseModel):
    """Where the page listens and the token that opens it (None: one is made at start)."""

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    token: SecretStr | None = None

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"must be at least {MIN_TOKEN_LENGTH} characters long (this one has "
                f"{len(token.get_secret_value())}); leave it unset and one is made for you"
            )
        return token

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach the page."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
