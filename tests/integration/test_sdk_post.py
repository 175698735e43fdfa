"""`SdkPost` (core/providers/_http.py): the providers' requests leave as the SDK's own would.

Both providers post over the SDK's HTTP client without the SDK's per-request pipeline. Each
test sends one request the SDK's own way (its low-level `post`) and one through the provider,
to the same fake, and compares what arrived; and a failure that never reached an answer comes
back as the SDK's error type, classified.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import anthropic
import openai
import pytest

from core.errors import ProviderError
from core.providers._http import SdkPost
from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from tests.fakes import Error, FakeAnthropic, FakeOpenAI, Stall, Text
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
    # The SDKs' aiohttp transports report a refused connection as a timeout (OpenAI's) or a
    # connection error (Anthropic's): the provider's error is the one the SDK's own `post`
    # raises.
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


@pytest.mark.parametrize(
    ("status", "kind", "sdk_error"),
    [
        (401, "auth", "AuthenticationError"),
        (429, "rate_limit", "RateLimitError"),
        (500, "server", "InternalServerError"),
    ],
)
async def test_an_http_error_is_the_class_the_sdks_own_request_raises(
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    make_openai: MakeOpenAI,
    make_anthropic: MakeAnthropic,
    status: int,
    kind: str,
    sdk_error: str,
) -> None:
    cases: list[tuple[OpenAIProvider | AnthropicProvider, FakeOpenAI | FakeAnthropic, str]] = [
        (make_openai(), fake_openai, GPT),
        (make_anthropic(), fake_anthropic, SONNET),
    ]
    for provider, fake, model in cases:
        vendor = openai if provider.name == "openai" else anthropic
        fake.script(Error(status, "scripted_error", "no, thank you"))

        with pytest.raises(ProviderError) as caught:
            await collect(provider, request(model))

        cause = caught.value.__cause__
        assert type(cause) is getattr(vendor, sdk_error)
        assert caught.value.kind == kind
        assert "no, thank you" in str(cause)


async def _malformed_server(answer: bytes) -> tuple[asyncio.Server, str]:
    """A server on 127.0.0.1 that reads a request and answers `answer`, then hangs up."""

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(reply, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 abc\r\n\r\n", b"not http at all\r\n\r\n"],
    ids=["bad status line", "garbage"],
)
async def test_a_malformed_answer_is_a_connection_error_we_retry(answer: bytes) -> None:
    server, url = await _malformed_server(answer)
    gpt = OpenAIProvider(api_key=TEST_API_KEY, base_url=f"{url}/v1")
    claude = AnthropicProvider(api_key=TEST_API_KEY, base_url=url)
    try:
        for provider, model, error in (
            (gpt, GPT, openai.APIConnectionError),
            (claude, SONNET, anthropic.APIConnectionError),
        ):
            with pytest.raises(ProviderError) as caught:
                await collect(provider, request(model))
            # A ProviderError of a kind the retries take (not a raw aiohttp error).
            assert caught.value.kind == "server"
            assert type(caught.value.__cause__) is error
    finally:
        await gpt.aclose()
        await claude.aclose()
        server.close()
        await server.wait_closed()


async def test_headers_merge_whatever_their_case() -> None:
    # The SDK merges its headers case-insensitively, a later one replacing an earlier one and
    # `Omit` removing one: a custom `user-agent` replaces its `User-Agent`, not joins it.
    http = anthropic.DefaultAioHttpClient()
    custom: Any = {
        "user-agent": "our-bot/1",
        "X-Extra": "yes",
        "x-stainless-lang": anthropic.Omit(),
    }
    client = anthropic.AsyncAnthropic(
        api_key=TEST_API_KEY,
        base_url="http://127.0.0.1:9",
        http_client=http,
        default_headers=custom,
    )
    post = SdkPost(
        client,
        http,
        "/v1/messages",
        timeout_error=anthropic.APITimeoutError,
        connection_error=anthropic.APIConnectionError,
    )
    try:
        headers = post._sdk_headers()
    finally:
        await client.close()

    assert headers.get_list("user-agent") == ["our-bot/1"]
    assert headers["x-extra"] == "yes"
    assert "x-stainless-lang" not in headers
    assert headers["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION
    assert TEST_API_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
