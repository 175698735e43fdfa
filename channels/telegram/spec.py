"""Telegram as the wiring sees it: settings from the environment, hint, mode, addresses."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec, settings_from_env
from channels.telegram.checks import CHECKS
from channels.telegram.hint import PROMPT_HINT
from channels.uploads import UploadLimits
from core.addresses import AddressGrammar
from core.envelopes import Address

__all__ = ["SPEC", "TelegramOptions"]

# Seconds between edits of a streamed reply: the platforms rate-limit edits of one message.
_STREAM_INTERVAL = 1.0

_ENV = {
    "token": "TELEGRAM_BOT_TOKEN",
    "api_url": "TELEGRAM_API_URL",
    "webhook_url": "TELEGRAM_WEBHOOK_URL",
    "webhook_secret": "TELEGRAM_WEBHOOK_SECRET",
    "webhook_port": "TELEGRAM_WEBHOOK_PORT",
}


class TelegramOptions(BaseModel):
    """The profile's `[channels.telegram]` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Catch-up after downtime: Telegram sends what was missed once the bot is back; answer it
    # from this many hours back at most, and at most this many late messages per
    # conversation. 0 turns catch-up off (late messages are read, not answered).
    catch_up_hours: float = Field(default=24.0, ge=0, le=24 * 14)
    catch_up_messages: int = Field(default=100, ge=0, le=1000)
    # Status reactions on the person's message: taken, then answered or failed.
    reactions: bool = True


# The Bot API takes documents of up to 50 MB and photos of up to 10 MB from a bot.
_UPLOADS = UploadLimits(file_bytes=50 * 1000 * 1000, image_bytes=10 * 1000 * 1000)


def _build(setup: ChannelSetup) -> ChannelAdapter:
    # Time periods as timedeltas, python-telegram-bot's future default: without it, every
    # flood-control error also emits a deprecation warning. Set before PTB is imported.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from channels.telegram.adapter import TelegramAdapter, TelegramSettings

    options = setup.options if isinstance(setup.options, TelegramOptions) else TelegramOptions()
    settings = settings_from_env(
        TelegramSettings,
        setup.env,
        _ENV,
        catch_up_hours=options.catch_up_hours,
        catch_up_messages=options.catch_up_messages,
        reactions=options.reactions,
    )
    return TelegramAdapter(
        settings,
        menu=setup.menu,
        replies=setup.replies,
        documents=setup.documents,
        uploads=_UPLOADS,
    )


def _leader_role(env: Mapping[str, str]) -> str | None:
    # Long polling allows one reader per bot token; a webhook is served by every replica.
    return None if env.get("TELEGRAM_WEBHOOK_URL") else "telegram-poller"


def _admin_dm(user_id: str) -> Address:
    # A private chat's id is its person's id.
    return Address(platform="telegram", chat=user_id)


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
    options=TelegramOptions,
    uploads=_UPLOADS,
    env=tuple(_ENV.values()),
    secret_env=("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"),
    # A bot token, also inside Bot API URLs (".../bot<token>/getUpdates").
    secret_patterns=(r"(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}",),
    leader_role=_leader_role,
    # Sending needs no poller lease: a standby gateway delivers while another polls.
    delivers_on_standby=True,
    stream_interval=_STREAM_INTERVAL,
    # Tool notes would be messages of their own; the typing indicator says the bot works.
    shows_progress=False,
    checks=CHECKS,
    admin_dm=_admin_dm,
    # A stopped answer keeps its text, its message edited to say it was stopped.
    edits_in_place=True,
)
