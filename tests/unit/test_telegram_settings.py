"""Telegram adapter settings that must be refused before anything starts."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bots.platforms import command_registry
from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.errors import ConfigError
from core.store.replies import MemoryReplyRecords

MENU = command_registry().menu()

TOKEN = SecretStr("123456789:AAF-test-token-abcdefghijklmnopqrstuv")


def test_webhook_mode_needs_a_secret() -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_WEBHOOK_SECRET"):
        TelegramAdapter(
            TelegramSettings(token=TOKEN, webhook_url="https://bot.example/tg"),
            menu=MENU,
            replies=_replies(),
        )


@pytest.mark.parametrize("secret", ["short", "has spaces in it, sixteen+", "x" * 257])
def test_webhook_secret_must_be_long_and_plain(secret: str) -> None:
    with pytest.raises(ConfigError, match="16 to 256"):
        TelegramAdapter(
            replies=_replies(),
            settings=TelegramSettings(
                token=TOKEN, webhook_url="https://bot.example/tg", webhook_secret=SecretStr(secret)
            ),
            menu=MENU,
        )


def test_the_bot_key_is_the_token_id() -> None:
    adapter = TelegramAdapter(TelegramSettings(token=TOKEN), menu=MENU, replies=_replies())
    assert adapter.bot_key == "123456789"


def _replies() -> ReplyStreams:
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())
