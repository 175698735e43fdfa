"""Telegram as the wiring sees it: settings from the environment, hint, mode, addresses."""

from __future__ import annotations

import os
from collections.abc import Mapping

from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec, settings_from_env
from channels.telegram.hint import PROMPT_HINT
from core.addresses import AddressGrammar

__all__ = ["SPEC"]

# Seconds between edits of a streamed reply: the platforms rate-limit edits of one message.
_STREAM_INTERVAL = 1.0

_ENV = {
    "token": "TELEGRAM_BOT_TOKEN",
    "api_url": "TELEGRAM_API_URL",
    "webhook_url": "TELEGRAM_WEBHOOK_URL",
    "webhook_secret": "TELEGRAM_WEBHOOK_SECRET",
    "webhook_port": "TELEGRAM_WEBHOOK_PORT",
}


def _build(setup: ChannelSetup) -> ChannelAdapter:
    # Time periods as timedeltas, python-telegram-bot's future default: without it, every
    # flood-control error also emits a deprecation warning. Set before PTB is imported.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from channels.telegram.adapter import TelegramAdapter, TelegramSettings

    return TelegramAdapter(
        settings_from_env(TelegramSettings, setup.env, _ENV),
        menu=setup.menu,
        replies=setup.replies,
    )


def _leader_role(env: Mapping[str, str]) -> str | None:
    # Long polling allows one reader per bot token; a webhook is served by every replica.
    return None if env.get("TELEGRAM_WEBHOOK_URL") else "telegram-poller"


SPEC = ChannelSpec(
    name="telegram",
    prompt_hint=PROMPT_HINT,
    default_mode="safe-chat",
    address=AddressGrammar(
        platform="telegram",
        usage="telegram:<chat id>[:<thread id>]",
        chat=r"-?\d+",
        thread=r"-?\d+",
        example="telegram:-1001234567890",
    ),
    build=_build,
    env=tuple(_ENV.values()),
    secret_env=("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"),
    # A bot token, also inside Bot API URLs (".../bot<token>/getUpdates").
    secret_patterns=(r"(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}",),
    leader_role=_leader_role,
    stream_interval=_STREAM_INTERVAL,
    # Tool notes would be messages of their own; the typing indicator says the bot works.
    shows_progress=False,
)
