"""The payloads of the Discord fake: users, guilds, channels, messages and interactions as the
gateway and the REST API carry them (API v10, ids as strings).

`EventBuilders` is mixed into `FakeDiscord`: each builder makes one gateway event, dispatches it
and returns its payload. Users are `user<id>` / `User <id>`; ids the fake makes are snowflakes.
"""

from __future__ import annotations

import base64
import itertools
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ASK_OPTION",
    "CHANNEL",
    "DEFAULT_BOT_ID",
    "DEFAULT_TOKEN",
    "GUILD",
    "OTHER_CHANNEL",
    "EventBuilders",
    "Guild",
    "Snowflakes",
    "token_for",
    "user_object",
]

DEFAULT_BOT_ID = 1234567890123456789
GUILD = 700000000000000001
CHANNEL = 700000000000000010  # "general" in GUILD
OTHER_CHANNEL = 700000000000000011  # "random" in GUILD
ASK_OPTION = "question"
# Every permission but administrator: what a bot invited with a generous URL holds.
_PERMISSIONS = str((1 << 47) - 1 & ~(1 << 3))
_DISCORD_EPOCH_MS = 1_420_070_400_000


def token_for(bot_id: int) -> str:
    """A bot token shaped like Discord's: base64 of the bot's id, a timestamp part, an HMAC."""
    head = base64.b64encode(str(bot_id).encode()).decode().rstrip("=")
    return f"{head}.GfAkE1.s3cr3t-f4ke-HMAC-part_0123456789abcdefgh"


DEFAULT_TOKEN = token_for(DEFAULT_BOT_ID)


class Snowflakes:
    """Fresh, increasing snowflake ids (their timestamp part is now)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def __call__(self, at: datetime | None = None) -> int:
        """A new id made now, or at `at` (a message sent in the past)."""
        seconds = at.timestamp() if at is not None else time.time()
        millis = int(seconds * 1000) - _DISCORD_EPOCH_MS
        return (millis << 22) | (next(self._counter) & 0x3FFFFF)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user_object(user_id: int, *, bot: bool = False, name: str | None = None) -> dict[str, Any]:
    """A `User` object."""
    username = name or f"user{user_id}"
    return {
        "id": str(user_id),
        "username": username,
        "discriminator": "0",
        "global_name": None if bot else f"User {user_id}",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def member_object(user: dict[str, Any] | None = None) -> dict[str, Any]:
    """A guild `Member` object (with its `user` when given: MESSAGE_CREATE leaves it out)."""
    member: dict[str, Any] = {
        "roles": [],
        "joined_at": now_iso(),
        "deaf": False,
        "mute": False,
        "flags": 0,
        "nick": None,
        "avatar": None,
        "pending": False,
    }
    if user is not None:
        member["user"] = user
    return member


def text_channel(channel_id: int, guild_id: int, name: str, position: int = 0) -> dict[str, Any]:
    """A guild text channel."""
    return {
        "id": str(channel_id),
        "type": 0,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "parent_id": None,
        "topic": None,
        "nsfw": False,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def thread_channel(
    thread_id: int, guild_id: int, parent_id: int, name: str, owner_id: int
) -> dict[str, Any]:
    """A public thread."""
    return {
        "id": str(thread_id),
        "type": 11,
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "owner_id": str(owner_id),
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": now_iso(),
            "locked": False,
        },
    }


def dm_channel(channel_id: int, recipient: dict[str, Any]) -> dict[str, Any]:
    """A direct-message channel with one user."""
    return {"id": str(channel_id), "type": 1, "recipients": [recipient], "last_message_id": None}


@dataclass
class Guild:
    """A guild the bot is in: its text channels and threads, by id."""

    id: int
    name: str
    channels: dict[int, dict[str, Any]] = field(default_factory=dict)
    threads: dict[int, dict[str, Any]] = field(default_factory=dict)

    def payload(self, bot_user: dict[str, Any]) -> dict[str, Any]:
        """The GUILD_CREATE payload: roles with @everyone (id == guild id), the bot as member."""
        everyone = {
            "id": str(self.id),
            "name": "@everyone",
            "permissions": _PERMISSIONS,
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
        return {
            "id": str(self.id),
            "name": self.name,
            "icon": None,
            "owner_id": "1",
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "features": [],
            "mfa_level": 0,
            "system_channel_flags": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "roles": [everyone],
            "emojis": [],
            "stickers": [],
            "channels": list(self.channels.values()),
            "threads": list(self.threads.values()),
            "members": [member_object(bot_user)],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "joined_at": now_iso(),
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }


class EventBuilders(ABC):
    """Builders of what users do; the host provides `dispatch`, the bot and the registries."""

    bot_id: int
    application_id: int
    guilds: dict[int, Guild]
    snowflake: Snowflakes

    def __init__(self) -> None:
        self.dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self.attachments: dict[str, tuple[str, bytes]] = {}  # path -> (content type, bytes)
        self.inbound: dict[int, dict[str, Any]] = {}  # message id -> MESSAGE_CREATE payload
        self.interactions: dict[int, dict[str, Any]] = {}  # interaction id -> payload

    @abstractmethod
    def dispatch(self, event: str, data: dict[str, Any]) -> int:
        """Send a DISPATCH event on the gateway (or keep it for the resume); its sequence."""

    @abstractmethod
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`: where attachments are served."""

    @abstractmethod
    def bot_message(self, channel_id: int) -> dict[str, Any] | None:
        """The bot's latest message in a channel, for a reply to quote."""

    @property
    def bot_user(self) -> dict[str, Any]:
        return user_object(self.bot_id, bot=True, name="switchboard")

    # -- where messages happen ----------------------------------------------------------------

    def dm_channel_id(self, user_id: int) -> int:
        """The DM channel between the bot and `user_id` (made on first use)."""
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = self.snowflake()
        return self.dm_channels[user_id]

    def guild_of(self, channel_id: int) -> Guild | None:
        for guild in self.guilds.values():
            if channel_id in guild.channels or channel_id in guild.threads:
                return guild
        return None

    def channel_payload(self, channel_id: int) -> dict[str, Any] | None:
        """A guild channel, thread or DM channel the fake knows, or None."""
        for guild in self.guilds.values():
            found = guild.channels.get(channel_id) or guild.threads.get(channel_id)
            if found is not None:
                return found
        for user_id, dm_id in self.dm_channels.items():
            if dm_id == channel_id:
                return dm_channel(dm_id, user_object(user_id))
        return None

    def start_thread(
        self, parent_id: int, name: str = "a thread", *, owner_id: int = 42
    ) -> dict[str, Any]:
        """A user starts a thread in a guild channel: THREAD_CREATE; returns the thread."""
        guild = self.guild_of(parent_id)
        assert guild is not None, f"channel {parent_id} is in no guild of the fake"
        thread = thread_channel(self.snowflake(), guild.id, parent_id, name, owner_id)
        guild.threads[int(thread["id"])] = thread
        self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return thread

    def add_attachment(
        self, data: bytes, *, filename: str = "image.png", content_type: str = "image/png"
    ) -> dict[str, Any]:
        """Serve `data` like Discord's CDN; returns the `Attachment` object to send with."""
        attachment_id = self.snowflake()
        path = f"attachments/{attachment_id}/{filename}"
        self.attachments[path] = (content_type, data)
        url = f"{self.base_url()}/{path}"
        return {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
            "width": 1,
            "height": 1,
        }

    # -- messages -------------------------------------------------------------------------------

    def dm(
        self,
        user_id: int,
        content: str,
        *,
        attachments: list[dict[str, Any]] | None = None,
        sent_at: datetime | None = None,
        live: bool = True,
    ) -> dict[str, Any]:
        """`user_id` writes to the bot in their DM channel (no guild_id, no member).

        `sent_at` back-dates it; without `live` it is only kept in the channel's history (sent
        while no bot was connected).
        """
        author = user_object(user_id)
        channel = self.dm_channel_id(user_id)
        message = self._message(channel, author, content, attachments, sent_at)
        if live:
            self.dispatch("MESSAGE_CREATE", message)
        return message

    def post(
        self,
        channel_id: int,
        content: str,
        *,
        user_id: int = 42,
        mention: bool = False,
        reply_to: dict[str, Any] | None = None,
        reply_to_bot: bool = False,
        attachments: list[dict[str, Any]] | None = None,
        bot: bool = False,
        sent_at: datetime | None = None,
        live: bool = True,
    ) -> dict[str, Any]:
        """`user_id` writes in a guild channel or thread.

        `mention` puts `<@bot>` before the text; `reply_to` makes it a reply to that message,
        `reply_to_bot` a reply to the bot's latest message there. `bot` makes the author a bot.
        `sent_at` and `live` as for `dm`.
        """
        guild = self.guild_of(channel_id)
        assert guild is not None, f"channel {channel_id} is in no guild of the fake"
        author = user_object(user_id, bot=bot)
        if mention:
            content = f"<@{self.bot_id}> {content}"
        message = self._message(channel_id, author, content, attachments, sent_at)
        message["guild_id"] = str(guild.id)
        message["member"] = member_object()
        if reply_to_bot:
            reply_to = self.bot_message(channel_id)
            assert reply_to is not None, f"the bot has not written in {channel_id}"
        if reply_to is not None:
            message["type"] = 19
            message["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                "guild_id": str(guild.id),
            }
            message["referenced_message"] = reply_to
            replied = reply_to["author"]
            if all(m["id"] != replied["id"] for m in message["mentions"]):
                message["mentions"].append(replied)
        for mentioned in message["mentions"]:
            mentioned["member"] = member_object()
        if live:
            self.dispatch("MESSAGE_CREATE", message)
        return message

    def redeliver(self, message: dict[str, Any]) -> int:
        """Dispatch an already sent MESSAGE_CREATE again, as a replaying gateway would."""
        return self.dispatch("MESSAGE_CREATE", message)

    def _message(
        self,
        channel_id: int,
        author: dict[str, Any],
        content: str,
        attachments: list[dict[str, Any]] | None,
        sent_at: datetime | None = None,
    ) -> dict[str, Any]:
        mentions = []
        if f"<@{self.bot_id}>" in content or f"<@!{self.bot_id}>" in content:
            mentions.append(self.bot_user)
        message: dict[str, Any] = {
            "id": str(self.snowflake(sent_at)),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": (sent_at or datetime.now(UTC)).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions,
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        self.inbound[int(message["id"])] = message
        return message

    # -- slash commands --------------------------------------------------------------------------

    def slash(
        self,
        name: str,
        *,
        channel_id: int | None = None,
        user_id: int = 42,
        options: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """`user_id` runs `/name` in a guild channel or thread, or in their DM without
        `channel_id`: INTERACTION_CREATE of type 2. Returns the interaction (with its token)."""
        data = {
            "id": str(self.snowflake()),
            "name": name,
            "type": 1,
            "options": [
                {"name": key, "type": 3, "value": value} for key, value in (options or {}).items()
            ],
        }
        return self._interaction_create(2, data, channel_id=channel_id, user_id=user_id)

    def press(self, message: dict[str, Any], custom_id: str, *, user_id: int) -> dict[str, Any]:
        """`user_id` presses the button `custom_id` of the bot's `message` (its JSON, as
        `bot_message` gives it): INTERACTION_CREATE of type 3. Returns the interaction."""
        buttons = [
            component
            for row in message.get("components") or []
            for component in row.get("components") or []
        ]
        if not any(button.get("custom_id") == custom_id for button in buttons):
            raise ValueError(f"no button {custom_id!r} on {message.get('content')!r}")
        channel_id = int(message["channel_id"])
        in_dm = self.guild_of(channel_id) is None
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interaction_create(
            3,
            data,
            channel_id=None if in_dm else channel_id,
            user_id=user_id,
            message=message,
        )

    def _interaction_create(
        self,
        kind: int,
        data: dict[str, Any],
        *,
        channel_id: int | None,
        user_id: int,
        message: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Dispatch an INTERACTION_CREATE of `kind` by `user_id` in a guild channel, or in
        their DM without `channel_id`; returns it."""
        user = user_object(user_id)
        interaction: dict[str, Any] = {
            "id": str(self.snowflake()),
            "application_id": str(self.application_id),
            "type": kind,
            "data": data,
            "token": f"aW50ZXJhY3Rpb24{self.snowflake()}ZmFrZS1pbnRlcmFjdGlvbi10b2tlbg",
            "version": 1,
            "app_permissions": _PERMISSIONS,
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if channel_id is None:
            channel = dm_channel(self.dm_channel_id(user_id), user)
            interaction.update(
                user=user, context=1, authorizing_integration_owners={"1": str(user_id)}
            )
        else:
            guild = self.guild_of(channel_id)
            found = self.channel_payload(channel_id)
            assert guild is not None and found is not None, f"unknown channel {channel_id}"
            channel = found
            interaction.update(
                guild_id=str(guild.id),
                guild_locale="en-US",
                member={**member_object(user), "permissions": _PERMISSIONS},
                context=0,
                authorizing_integration_owners={"0": str(guild.id)},
            )
        interaction["channel_id"] = channel["id"]
        interaction["channel"] = channel
        if message is not None:
            interaction["message"] = message
        self.interactions[int(interaction["id"])] = interaction
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction
