"""`SdkPost` (core/providers/_http.py): the providers' requests leave as the SDK's own would.

Both providers post over the SDK's HTTP client without the SDK's per-request pipeline. Each
test sends one request the SDK's own way (its low-level `post`) and one through the provider,
to the same fake, and compares what arrived; and a failure that never reached an answer comes
back as the SDK's error type, classified.
"""

from __future__ import annotations

import socket
from typing import Any

import anthropic
import openai
import pytest

from core.errors import ProviderError
from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from tests.fakes import FakeAnthropic, FakeOpenAI, Stall, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.conftest import MakeAnthropic, MakeOpenAI
from tests.integration.helpers import GPT, SONNET, collect, request

# Telemetry headers the SDK's own pipeline makes for each request, left out on purpose, and
# the body's length, which differs with the body.
_PER_REQUEST = {
    "x-stainless-retry-count",
    "x-stainless-read-timeout",
    "x-stainless-timeout",
    "content-length",
}


def _lasting(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name not in _PER_REQUEST}


async def _drain(stream: Any) -> None:
    """Read an SDK stream to its end (its request is then recorded whole)."""
    async with stream:
        async for _ in stream:
            pass


async def test_openai_requests_carry_the_sdks_own_headers(
    fake_openai: FakeOpenAI, make_openai: MakeOpenAI
) -> None:
    gpt = make_openai()
    fake_openai.script(Text("the SDK's way"), Text("ours"))
    body = {"model": GPT, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    options: Any = {"security": {"bearer_auth": True}}
    stream_cls = openai.AsyncStream[object]
    await _drain(
        await gpt._client.post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=True,
            stream_cls=stream_cls,
            options=options,
        )
    )
    events = await collect(gpt, request(GPT))

    assert any(getattr(e, "text", "") == "ours" for e in events)
    theirs, ours = (recorded.headers for recorded in fake_openai.requests)
    assert _lasting(ours) == _lasting(theirs)
    assert ours["authorization"] == f"Bearer {TEST_API_KEY}"
    assert ours["user-agent"].startswith("AsyncOpenAI/Python")
    assert [r.path for r in fake_openai.requests] == ["/v1/chat/completions"] * 2


async def test_anthropic_requests_carry_the_sdks_own_headers(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    claude = make_anthropic()
    fake_anthropic.script(Text("the SDK's way"), Text("ours"))
    body = {"model": SONNET, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    stream_cls = anthropic.AsyncStream[object]
    await _drain(
        await claude._client.post(
            "/v1/messages",
            body={**body, "stream": True},
            cast_to=object,
            stream=True,
            stream_cls=stream_cls,
        )
    )
    events = await collect(claude, request(SONNET))

    assert any(getattr(e, "text", "") == "ours" for e in events)
    theirs, ours = (recorded.headers for recorded in fake_anthropic.requests)
    assert _lasting(ours) == _lasting(theirs)
    assert ours["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION
    assert ours["user-agent"].startswith("AsyncAnthropic/Python")
    assert [r.path for r in fake_anthropic.requests] == ["/v1/messages"] * 2


def _refusing_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_refused_connection_fails_as_the_sdks_own_request_does() -> None:
    # The SDK's aiohttp transport reports a refused connection as a connect timeout: the
    # provider's error is the one the SDK's own `post` raises, classified the same.
    url = f"http://127.0.0.1:{_refusing_port()}"
    gpt = OpenAIProvider(api_key=TEST_API_KEY, base_url=f"{url}/v1")
    claude = AnthropicProvider(api_key=TEST_API_KEY, base_url=url)
    providers: list[tuple[OpenAIProvider | AnthropicProvider, str, str]] = [
        (gpt, GPT, "/chat/completions"),
        (claude, SONNET, "/v1/messages"),
    ]
    for provider, model, path in providers:
        try:
            with pytest.raises(ProviderError) as caught:
                await collect(provider, request(model))
            with pytest.raises(Exception) as sdk:
                await provider._client.post(path, body={}, cast_to=object)
        finally:
            await provider.aclose()
        assert type(caught.value.__cause__) is type(sdk.value)
        assert isinstance(sdk.value, openai.APIConnectionError | anthropic.APIConnectionError)
        assert caught.value.kind in ("server", "timeout")
        assert provider.name in str(caught.value)


async def test_an_answer_that_never_starts_is_the_sdks_timeout(
    fake_openai: FakeOpenAI, make_openai: MakeOpenAI
) -> None:
    gpt = make_openai(timeout=0.2)
    fake_openai.script(Stall(seconds=5))

    with pytest.raises(ProviderError) as caught:
        await collect(gpt, request(GPT))

    assert caught.value.kind == "timeout"
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
