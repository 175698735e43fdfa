"""Pytest fixtures that start the LLM API fakes; `tests/conftest.py` imports them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI

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
