"""The Telegram channel: python-telegram-bot adapter (`adapter`), HTML formatting (`format`)
and the prompt hint (`hint`). Import the adapter from `channels.telegram.adapter`; this package
stays light so the prompt hint can be read without loading python-telegram-bot."""

from channels.telegram.hint import PROMPT_HINT

__all__ = ["PROMPT_HINT"]
