"""`ChannelPolicy`: which capability mode a chat gets, and limits on what users may send.

Who may talk to the bot at all is decided per platform by `PlatformAccess` (the profile's
`[access.<platform>]` table) together with the allowlists; `core/access.py` applies them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.envelopes import Address, Inbound

__all__ = ["AllowList", "ChannelPolicy", "DmPolicy", "GroupPolicy", "PlatformAccess"]

# Who may start a direct conversation: people an operator approved after they asked with a
# pairing code, only the people on the allowlist, anyone, or nobody (admins always may).
DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
# In groups: answer when addressed, every message, only in the listed `groups`, or never.
GroupPolicy = Literal["mention", "all", "allowlist", "disabled"]


class AllowList(BaseModel):
    """Who may talk to the bot on one platform: user ids and chat ids (strings)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: frozenset[str] = frozenset()
    chats: frozenset[str] = frozenset()
    # Whole workspaces or servers (the `team` of an `Inbound`).
    teams: frozenset[str] = frozenset()


class PlatformAccess(BaseModel):
    """`[access.<platform>]`: who may talk to the bot on one platform, in DMs and in groups."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dm_policy: DmPolicy = "pairing"
    # None: the older `group_replies` key decides ("mention" or "all").
    group_policy: GroupPolicy | None = None
    # The group chat ids answered under `group_policy = "allowlist"`.
    groups: frozenset[str] = frozenset()

    @model_validator(mode="after")
    def _groups_need_the_allowlist(self) -> PlatformAccess:
        if self.groups and self.group_policy != "allowlist":
            raise ValueError('`groups` only applies with group_policy = "allowlist"')
        return self


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
    # `[access.<platform>]` per platform; a platform without an entry gets `default_access`.
    access: dict[str, PlatformAccess] = Field(default_factory=dict)
    # "allowlist" here, so that code building a policy by hand answers as before: the
    # allowlist when the platform has one, everyone otherwise. The product's default,
    # `pairing`, is the profile's, which `bots/` passes in.
    default_access: PlatformAccess = PlatformAccess(dm_policy="allowlist")
    # Platforms whose chats are the operator's own (the terminal, the local web page): no
    # access policy applies there and whoever writes is an admin. `bots/` names them.
    local_platforms: frozenset[str] = frozenset()

    def access_for(self, platform: str) -> PlatformAccess:
        """The access settings of `platform`."""
        return self.access.get(platform, self.default_access)

    def group_policy(self, platform: str) -> GroupPolicy:
        """How the bot answers in the groups of `platform` (`group_replies` when unset)."""
        return self.access_for(platform).group_policy or self.group_replies

    def lists(self, inbound: Inbound) -> bool:
        """Whether the allowlist names this message's user, chat or team (an empty or missing
        allowlist names nobody)."""
        allowed = self.allow.get(inbound.address.platform)
        return allowed is not None and (
            inbound.user_id in allowed.users
            or inbound.address.chat in allowed.chats
            or (inbound.team is not None and inbound.team in allowed.teams)
        )

    def lists_person(self, inbound: Inbound) -> bool:
        """Whether the allowlist names this person (by user id or team), not just the chat."""
        allowed = self.allow.get(inbound.address.platform)
        return allowed is not None and (
            inbound.user_id in allowed.users
            or (inbound.team is not None and inbound.team in allowed.teams)
        )

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
            or self.group_policy(inbound.address.platform) == "all"
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
