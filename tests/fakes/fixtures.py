"""Pytest fixtures that start the API fakes; `tests/conftest.py` imports them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.embeddings_api import FakeEmbeddings
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.search_api import FakeSearch
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

TEST_API_KEY = "test-key"


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    """A started Anthropic Messages API fake that accepts the key `TEST_API_KEY`."""
    async with FakeAnthropic(api_key=TEST_API_KEY) as fake:
        yield fake


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started OpenAI Chat Completions API fake that accepts the key `TEST_API_KEY`."""
    async with FakeOpenAI(api_key=TEST_API_KEY) as fake:
        yield fake


@pytest.fixture
async def fake_embeddings() -> AsyncIterator[FakeEmbeddings]:
    """A started `/v1/embeddings` fake (made-up vectors) that accepts the key `TEST_API_KEY`."""
    async with FakeEmbeddings(api_key=TEST_API_KEY) as fake:
        yield fake


@pytest.fixture
async def fake_search() -> AsyncIterator[FakeSearch]:
    """A started Brave Search and SearXNG fake (its Brave key is `FakeSearch().api_key`)."""
    async with FakeSearch() as fake:
        yield fake


@pytest.fixture
async def fake_telegram(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    """A started Telegram Bot API fake for the default test token (`FakeTelegram().token`).

    Sets `PTB_TIMEDELTA=1`: without it PTB 22 warns (PTBDeprecationWarning) whenever a time
    period such as `RetryAfter.retry_after` is read, even inside `RetryAfter.__init__`, and
    under `filterwarnings = error` that warning replaces the `RetryAfter` itself. With it,
    `retry_after` is a `datetime.timedelta`.
    """
    monkeypatch.setenv("PTB_TIMEDELTA", "1")
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """A started Slack fake (Web API, files, Socket Mode) for the default tokens and secret."""
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    """A started Discord gateway and REST fake for the default test bot (`FakeDiscord().token`)."""
    async with FakeDiscord() as fake:
        yield fake
