"""The providers' requests leave as the SDK's typed calls' would, through its public API.

Both providers send a body they encoded themselves through the SDK's documented low-level
`post`. Each test sends one request the SDK's typed way (`chat.completions.create`,
`messages.create`) and one through the provider, to the same fake, and compares what arrived;
and a failure comes back as the SDK's error type, classified.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import anthropic
import openai
import pytest

from core.errors import ProviderError
from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from tests.fakes import Error, FakeAnthropic, FakeOpenAI, Stall, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.conftest import MakeAnthropic, MakeOpenAI
from tests.integration.helpers import GPT, SONNET, collect, request

# The body's length, which differs with the body; the SDK marks a typed streaming call as made
# by its helper in some versions; the Anthropic SDK's typed calls carry the current trace
# context (its own OpenTelemetry spans) once the process has a tracer provider, which
# depends on the tests that ran before in this process.
_PER_REQUEST = {"content-length", "x-stainless-helper-method", "traceparent", "tracestate"}


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
    sdk = openai.AsyncOpenAI(
        api_key=TEST_API_KEY,
        base_url=fake_openai.url,
        max_retries=0,
        timeout=10.0,
        http_client=openai.DefaultAioHttpClient(timeout=10.0),
    )
    try:
        await _drain(
            await sdk.chat.completions.create(
                model=GPT, messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
    finally:
        await sdk.close()
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
    sdk = anthropic.AsyncAnthropic(
        api_key=TEST_API_KEY,
        base_url=fake_anthropic.url,
        max_retries=0,
        timeout=10.0,
        http_client=anthropic.DefaultAioHttpClient(timeout=10.0),
    )
    try:
        await _drain(
            await sdk.messages.create(
                model=SONNET,
                max_tokens=64,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
        )
    finally:
        await sdk.close()
    events = await collect(claude, request(SONNET))

    assert any(getattr(e, "text", "") == "ours" for e in events)
    theirs, ours = (recorded.headers for recorded in fake_anthropic.requests)
    assert _lasting(ours) == _lasting(theirs)
    assert ours["anthropic-version"]
    assert ours["user-agent"].startswith("AsyncAnthropic/Python")
    assert [r.path for r in fake_anthropic.requests] == ["/v1/messages"] * 2


def _refusing_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_refused_connection_fails_as_the_sdks_typed_request_does() -> None:
    # The SDKs' aiohttp transports report a refused connection as a timeout (OpenAI's) or a
    # connection error (Anthropic's): the provider's error is the one the SDK's typed call
    # raises.
    url = f"http://127.0.0.1:{_refusing_port()}"
    hi: Any = [{"role": "user", "content": "hi"}]
    gpt = OpenAIProvider(api_key=TEST_API_KEY, base_url=f"{url}/v1")
    openai_sdk = openai.AsyncOpenAI(
        api_key=TEST_API_KEY,
        base_url=f"{url}/v1",
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(),
    )
    claude = AnthropicProvider(api_key=TEST_API_KEY, base_url=url)
    anthropic_sdk = anthropic.AsyncAnthropic(
        api_key=TEST_API_KEY,
        base_url=url,
        max_retries=0,
        http_client=anthropic.DefaultAioHttpClient(),
    )
    try:
        with pytest.raises(ProviderError) as gpt_failed:
            await collect(gpt, request(GPT))
        with pytest.raises(openai.APIConnectionError) as openai_failed:
            await openai_sdk.chat.completions.create(model=GPT, messages=hi, stream=True)
        with pytest.raises(ProviderError) as claude_failed:
            await collect(claude, request(SONNET))
        with pytest.raises(anthropic.APIConnectionError) as anthropic_failed:
            await anthropic_sdk.messages.create(
                model=SONNET, max_tokens=64, messages=hi, stream=True
            )
    finally:
        for closing in (gpt, claude, openai_sdk, anthropic_sdk):
            await closing.close() if hasattr(closing, "close") else await closing.aclose()

    for provider, caught, sdk in (
        (gpt, gpt_failed, openai_failed),
        (claude, claude_failed, anthropic_failed),
    ):
        assert type(caught.value.__cause__) is type(sdk.value)
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
