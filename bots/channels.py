"""Which chat platforms this process serves, built from the settings and the profile."""

from __future__ import annotations

import os

from bots.settings import Settings
from channels.base import ChannelAdapter
from core.errors import ConfigError
from core.profile import Profile

__all__ = ["PLATFORMS", "adapter_for", "configured_adapters"]

PLATFORMS = ("telegram",)


def adapter_for(
    platform: str, settings: Settings, profile: Profile | None = None
) -> ChannelAdapter:
    """The adapter of one platform; `ConfigError` naming the missing variable.

    Platform libraries are imported here, so a process loads only those it serves.
    """
    if platform == "telegram":
        return _telegram(settings)
    raise ConfigError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")


def configured_adapters(settings: Settings, profile: Profile | None = None) -> list[ChannelAdapter]:
    """An adapter for every platform whose token is set."""
    tokens = {
        "telegram": settings.telegram_bot_token,
    }
    return [adapter_for(name, settings, profile) for name, token in tokens.items() if token]


def _telegram(settings: Settings) -> ChannelAdapter:
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
        )
    )
