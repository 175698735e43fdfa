"""Which chat platforms this process serves, built from the settings."""

from __future__ import annotations

import os

from bots.settings import Settings
from channels.base import ChannelAdapter
from core.errors import ConfigError

__all__ = ["PLATFORMS", "adapter_for", "configured_adapters"]

PLATFORMS = ("telegram",)


def adapter_for(platform: str, settings: Settings) -> ChannelAdapter:
    """The adapter of one platform; `ConfigError` naming the missing variable."""
    if platform == "telegram":
        if settings.telegram_bot_token is None:
            raise ConfigError("TELEGRAM_BOT_TOKEN is not set")
        # Time periods as timedeltas, python-telegram-bot's future default: without it, every
        # flood-control error also emits a deprecation warning.
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        # Imported here: python-telegram-bot is only loaded by processes that use it.
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
    raise ConfigError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")


def configured_adapters(settings: Settings) -> list[ChannelAdapter]:
    """An adapter for every platform whose token is set."""
    adapters: list[ChannelAdapter] = []
    if settings.telegram_bot_token is not None:
        adapters.append(adapter_for("telegram", settings))
    return adapters
