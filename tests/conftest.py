"""Fixtures and settings shared by every test directory."""

import os

# python-telegram-bot 22 warns (an error under filterwarnings=error) whenever a RetryAfter
# is built unless time periods are timedeltas; bots/channels.py sets the same for the product.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from tests.fakes.fixtures import fake_anthropic, fake_openai, fake_telegram

__all__ = ["fake_anthropic", "fake_openai", "fake_telegram"]
