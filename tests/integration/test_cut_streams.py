"""A model stream that ends without its end marker is an error, never a complete answer.

OpenAI ends a stream with a `finish_reason` (and `[DONE]`), Anthropic with `message_stop`; a
proxy timeout or a dropped upstream can close the connection cleanly before either. Both
providers run against their fakes, which stream the text and then just end.
"""

from __future__ import annotations

import pytest

from core.errors import ProviderError
from core.events import TextDelta
from core.providers.anthropic import AnthropicProvider
from core.providers.base import Provider, complete
from core.providers.openai import OpenAIProvider
from core.providers.reliable import ReliableProvider, RetryPolicy
from tests.fakes import Cut, FakeAnthropic, FakeOpenAI, Text
from tests.integration.helpers import GPT, SONNET, RecordingSleep, request

Vendor = tuple[FakeAnthropic | FakeOpenAI, Provider, str]


@pytest.fixture(params=["anthropic", "openai"])
def vendor(
    request: pytest.FixtureRequest,
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
    claude: AnthropicProvider,
    gpt: OpenAIProvider,
) -> Vendor:
    """Each vendor's fake, the provider talking to it and a model it knows."""
    if request.param == "anthropic":
        return fake_anthropic, claude, SONNET
    return fake_openai, gpt, GPT


async def test_a_stream_cut_after_some_text_is_an_error_after_that_text(vendor: Vendor) -> None:
    fake, provider, model = vendor
    fake.script(Cut("The first half of an answer that never"))
    received: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request(model)):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert "".join(received) == "The first half of an answer that never"
    assert caught.value.kind == "server"
    assert "cut off before its end" in str(caught.value)


async def test_a_stream_cut_before_any_text_is_retried(vendor: Vendor) -> None:
    fake, provider, model = vendor
    fake.script(Cut(), Text("The whole answer."))
    sleep = RecordingSleep()
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=3), sleep=sleep)

    completion = await complete(reliable, request(model))

    assert completion.text == "The whole answer."
    assert len(fake.requests) == 2
    assert len(sleep.waits) == 1


async def test_a_stream_cut_after_text_is_not_retried(vendor: Vendor) -> None:
    """Text already went to the person: a retry would show the answer twice."""
    fake, provider, model = vendor
    fake.script(Cut("Half of it"), Text("never asked for"))
    reliable = ReliableProvider(
        provider, policy=RetryPolicy(max_attempts=3), sleep=RecordingSleep()
    )

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(model))

    assert "cut off" in str(caught.value)
    assert len(fake.requests) == 1
    assert fake.pending == 1
