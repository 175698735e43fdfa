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
from tests.fakes import Cut, Error, FakeAnthropic, FakeOpenAI, Text, ToolUse
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


async def test_a_stream_cut_before_any_text_falls_back_to_one_whole_answer(
    vendor: Vendor,
) -> None:
    """Retries spent on a stream that never gave a first event: the same request, unstreamed."""
    fake, provider, model = vendor
    fake.script(Cut(), Text("The whole answer, in one response."))
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=1))

    completion = await complete(reliable, request(model))

    assert completion.text == "The whole answer, in one response."
    assert completion.stop_reason == "end_turn"
    assert [r.json.get("stream") for r in fake.requests] == [True, False]
    assert fake.requests[0].json["messages"] == fake.requests[1].json["messages"]


async def test_the_whole_answer_after_a_cut_stream_carries_its_tool_calls(vendor: Vendor) -> None:
    fake, provider, model = vendor
    fake.script(Cut(), ToolUse([("call_1", "calculator", {"expression": "6*7"})], text="Let me."))
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=1))

    completion = await complete(reliable, request(model))

    assert completion.text == "Let me."
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call_1", "calculator", {"expression": "6*7"})
    ]
    assert completion.stop_reason == "tool_use"
    assert completion.usage.output_tokens == 5


async def test_only_one_unstreamed_call_follows_a_failed_stream(vendor: Vendor) -> None:
    fake, provider, model = vendor
    fake.script(Cut(), Cut(), Text("never asked for"))
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=1))

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(model))

    assert caught.value.kind == "server"
    assert [r.json.get("stream") for r in fake.requests] == [True, False]
    assert fake.pending == 1


async def test_a_rate_limited_stream_is_not_asked_again_unstreamed(vendor: Vendor) -> None:
    """A rate limit refuses every way of asking: no extra call on top of the retries."""
    fake, provider, model = vendor
    limited = "rate_limit_error" if isinstance(fake, FakeAnthropic) else "rate_limit_exceeded"
    fake.script(Error(429, limited), Text("never asked for"))
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=1))

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(model))

    assert caught.value.kind == "rate_limit"
    assert len(fake.requests) == 1
