"""Discord as the wiring sees it: settings from the environment and the profile, hint, mode,
addresses."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec, settings_from_env
from channels.discord.checks import CHECKS, TOKEN_SHAPE
from channels.discord.hint import PROMPT_HINT
from channels.uploads import UploadLimits
from core.addresses import AddressGrammar

__all__ = ["SPEC", "DiscordOptions"]

# Seconds between edits of a streamed reply: the platforms rate-limit edits of one message.
_STREAM_INTERVAL = 1.0

_ENV = {
    "token": "DISCORD_BOT_TOKEN",
    "api_url": "DISCORD_API_URL",
    "gateway_url": "DISCORD_GATEWAY_URL",
}


class DiscordOptions(BaseModel):
    """The profile's `[channels.discord]` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Answer a mention in a new thread started from the message.
    reply_in_thread: bool = False
    # Catch-up after downtime: at start, answer what was sent to the bot while it was away,
    # from this many hours back at most, and at most this many messages per conversation.
    # 0 turns catch-up off.
    catch_up_hours: float = Field(default=24.0, ge=0, le=24 * 14)
    catch_up_messages: int = Field(default=100, ge=0, le=1000)
    # Status reactions on the person's message: taken, then answered or failed.
    reactions: bool = True


# A bot's upload limit in a server without boosts (and in DMs): 10 MiB per message.
_UPLOADS = UploadLimits(file_bytes=10 * 1024 * 1024)


def _build(setup: ChannelSetup) -> ChannelAdapter:
    from channels.discord.adapter import DiscordAdapter, DiscordSettings

    options = setup.options if isinstance(setup.options, DiscordOptions) else DiscordOptions()
    settings = settings_from_env(
        DiscordSettings,
        setup.env,
        _ENV,
        reply_in_thread=options.reply_in_thread,
        catch_up_hours=options.catch_up_hours,
        catch_up_messages=options.catch_up_messages,
        reactions=options.reactions,
    )
    return DiscordAdapter(
        settings,
        menu=setup.menu,
        replies=setup.replies,
        seen=setup.seen,
        documents=setup.documents,
        uploads=_UPLOADS,
    )


def _leader_role(env: Mapping[str, str]) -> str | None:
    # Every gateway connection of a bot gets every event, and a slash command is answered by
    # editing a response only the process that acknowledged it can edit.
    return "discord-gateway"


SPEC = ChannelSpec(
    name="discord",
    prompt_hint=PROMPT_HINT,
    default_mode="discord",
    # Channel ids are numeric snowflakes; a channel's name is refused.
    address=AddressGrammar(
        platform="discord",
        usage="discord:<channel id>",
        chat=r"\d+",
        example="discord:123456789012345678",
    ),
    build=_build,
    env=tuple(_ENV.values()),
    secret_env=("DISCORD_BOT_TOKEN",),
    secret_patterns=(TOKEN_SHAPE,),
    options=DiscordOptions,
    uploads=_UPLOADS,
    leader_role=_leader_role,
    stream_interval=_STREAM_INTERVAL,
    # Tool notes would be messages of their own; the typing indicator says the bot works.
    shows_progress=False,
    checks=CHECKS,
    # No admin_dm: a DM channel must be made through the API first, so admins get the event.
    # A stopped answer keeps its text, its message edited to say it was stopped.
    edits_in_place=True,
)
