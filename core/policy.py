"""`ChannelPolicy`: which capability mode a chat gets, and limits on what users may send."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.envelopes import Address, Inbound

__all__ = ["AllowList", "ChannelPolicy"]


class AllowList(BaseModel):
    """Who may talk to the bot on one platform: user ids and chat ids (strings)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: frozenset[str] = frozenset()
    chats: frozenset[str] = frozenset()
    # Whole workspaces or servers (the `team` of an `Inbound`).
    teams: frozenset[str] = frozenset()


class ChannelPolicy(BaseModel):
    """Per-platform and per-chat capability modes, decided by the worker, never the gateway."""

    model_config = ConfigDict(frozen=True)

    # Per platform; each platform's default comes from its channel (wired in `bots/`).
    modes: dict[str, str] = Field(default_factory=dict)
    # Overrides for one chat, keyed by session key prefix `<platform>:<bot>:<chat>`.
    chat_modes: dict[str, str] = Field(default_factory=dict)
    default_mode: str = "safe-chat"
    max_input_chars: int = Field(default=20_000, ge=1)
    # Per platform; a platform without an entry is open to everyone.
    allow: dict[str, AllowList] = Field(default_factory=dict)
    # In group chats: answer only messages addressed to the bot, or every message.
    group_replies: Literal["mention", "all"] = "mention"
    # "<platform>:<user id>" of the people trusted with `full` everywhere (and schedules
    # that run in `full`); `bots/` adds the operator of a local channel by default.
    admins: frozenset[str] = frozenset()

    def is_admin(self, platform: str, user_id: str) -> bool:
        """Whether this person is one of the admins."""
        return f"{platform}:{user_id}" in self.admins

    def admits(self, inbound: Inbound) -> bool:
        """Whether the allowlist lets this message's user or chat through."""
        allowed = self.allow.get(inbound.address.platform)
        if allowed is None or not (allowed.users or allowed.chats or allowed.teams):
            return True
        return (
            inbound.user_id in allowed.users
            or inbound.address.chat in allowed.chats
            or (inbound.team is not None and inbound.team in allowed.teams)
        )

    def addressed(self, inbound: Inbound) -> bool:
        """Whether the bot should answer: direct chats, mentions, replies, commands."""
        return (
            inbound.is_direct
            or inbound.mentions_bot
            or inbound.kind != "message"
            or inbound.origin == "scheduled"
            or self.group_replies == "all"
        )

    def mode_for(self, inbound: Inbound) -> str:
        """The name of the capability mode for this message's chat."""
        return self.mode_for_address(inbound.address)

    def mode_for_address(self, address: Address) -> str:
        """The name of the capability mode of a chat."""
        chat_key = f"{address.platform}:{address.bot}:{address.chat}"
        if chat_key in self.chat_modes:
            return self.chat_modes[chat_key]
        return self.modes.get(address.platform, self.default_mode)
