"""Fixtures of the provider integration tests: our providers on the fakes, and a store.

Providers made here are closed at teardown, before their fake stops: an open keep-alive
connection would otherwise surface as a ResourceWarning (an error under our warning filter).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import pytest

from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from tests.fakes import FakeAnthropic, FakeOpenAI
from tests.fakes.fixtures import TEST_API_KEY


class MakeAnthropic(Protocol):
    def __call__(self, *, api_key: str = ..., timeout: float = ...) -> AnthropicProvider: ...


class MakeOpenAI(Protocol):
    def __call__(self, *, api_key: str = ..., timeout: float = ...) -> OpenAIProvider: ...


@pytest.fixture
async def make_anthropic(fake_anthropic: FakeAnthropic) -> AsyncIterator[MakeAnthropic]:
    """Builds `AnthropicProvider`s pointed at the fake."""
    made: list[AnthropicProvider] = []

    def make(*, api_key: str = TEST_API_KEY, timeout: float = 10.0) -> AnthropicProvider:
        made.append(
            AnthropicProvider(api_key=api_key, base_url=fake_anthropic.url, timeout=timeout)
        )
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
async def make_openai(fake_openai: FakeOpenAI) -> AsyncIterator[MakeOpenAI]:
    """Builds `OpenAIProvider`s pointed at the fake."""
    made: list[OpenAIProvider] = []

    def make(*, api_key: str = TEST_API_KEY, timeout: float = 10.0) -> OpenAIProvider:
        made.append(OpenAIProvider(api_key=api_key, base_url=fake_openai.url, timeout=timeout))
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
def claude(make_anthropic: MakeAnthropic) -> AnthropicProvider:
    """An `AnthropicProvider` on the fake, with the accepted key."""
    return make_anthropic()


@pytest.fixture
def gpt(make_openai: MakeOpenAI) -> OpenAIProvider:
    """An `OpenAIProvider` on the fake, with the accepted key."""
    return make_openai()
