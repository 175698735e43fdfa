"""Which chat platforms this process serves, built from the settings and the profile."""

from __future__ import annotations

import os

from bots.settings import Settings
from channels.base import ChannelAdapter
from channels.streaming import ReplyStreams
from core.errors import ConfigError
from core.profile import Profile

__all__ = ["PLATFORMS", "adapter_for", "configured_adapters"]

PLATFORMS = ("telegram", "slack", "discord")


def adapter_for(
    platform: str, settings: Settings, profile: Profile | None = None, *, replies: ReplyStreams
) -> ChannelAdapter:
    """The adapter of one platform; `ConfigError` naming the missing variable.

    Platform libraries are imported here, so a process loads only those it serves.
    """
    if platform == "telegram":
        return _telegram(settings, replies)
    if platform == "slack":
        return _slack(settings, replies)
    if platform == "discord":
        return _discord(settings, profile, replies)
    raise ConfigError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")


def configured_adapters(
    settings: Settings, profile: Profile | None = None, *, replies: ReplyStreams
) -> list[ChannelAdapter]:
    """An adapter for every platform whose token is set."""
    tokens = {
        "telegram": settings.telegram_bot_token,
        "slack": settings.slack_bot_token,
        "discord": settings.discord_bot_token,
    }
    return [
        adapter_for(name, settings, profile, replies=replies)
        for name, token in tokens.items()
        if token
    ]


def _telegram(settings: Settings, replies: ReplyStreams) -> ChannelAdapter:
    if settings.telegram_bot_token is None:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set")
    # Time periods as timedeltas, python-telegram-bot's future default: without it, every
    # flood-control error also emits a deprecation warning.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from channels.telegram.adapter import TelegramAdapter, TelegramSettings

    return TelegramAdapter(
        TelegramSettings(
            token=settings.telegram_bot_token,
            api_url=settings.telegram_api_url,
            webhook_url=settings.telegram_webhook_url,
            webhook_secret=settings.telegram_webhook_secret,
            webhook_port=settings.telegram_webhook_port,
        ),
        replies=replies,
    )


def _slack(settings: Settings, replies: ReplyStreams) -> ChannelAdapter:
    if settings.slack_bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN is not set")
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        raise ConfigError(
            "Slack needs SLACK_SIGNING_SECRET (Events API over HTTP) or SLACK_APP_TOKEN "
            "(Socket Mode)"
        )
    from channels.slack.adapter import SlackAdapter, SlackSettings

    return SlackAdapter(
        SlackSettings(
            bot_token=settings.slack_bot_token,
            signing_secret=settings.slack_signing_secret,
            app_token=settings.slack_app_token,
            api_url=settings.slack_api_url,
            port=settings.slack_port,
        ),
        replies=replies,
    )


def _discord(settings: Settings, profile: Profile | None, replies: ReplyStreams) -> ChannelAdapter:
    if settings.discord_bot_token is None:
        raise ConfigError("DISCORD_BOT_TOKEN is not set")
    from channels.discord.adapter import DiscordAdapter, DiscordSettings

    return DiscordAdapter(
        DiscordSettings(
            token=settings.discord_bot_token,
            api_url=settings.discord_api_url,
            gateway_url=settings.discord_gateway_url,
            reply_in_thread=profile.settings.discord_reply_in_thread if profile else False,
        ),
        replies=replies,
    )
