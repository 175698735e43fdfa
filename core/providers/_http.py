"""Helpers shared by the HTTP API providers (never vendor formats: those stay in each module)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any, Protocol

import httpx2

from core.messages import ToolCall

__all__ = ["SdkPost", "dumps", "encode_body", "parse_retry_after", "tool_call_from_json"]

_MAX_RETRY_AFTER = 3600.0


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII text kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_body(fields: Mapping[str, Any], messages: str, *, tools: str | None = None) -> bytes:
    """A request body: `fields` plus a `"messages"` member (and a `"tools"` one) given as
    JSON already.

    Each message's JSON is made once and kept with it (`Message.derived`), and each tool's
    with its spec, so a request costs joining strings rather than serializing the whole
    conversation and every tool definition again on every step.
    """
    head = dumps(fields)
    extra = f'"tools":{tools},' if tools is not None else ""
    return f'{head[:-1]}{"," if len(head) > 2 else ""}{extra}"messages":{messages}}}'.encode()


class _SdkClient(Protocol):
    """What `SdkPost` reads of an official SDK's client (both are generated alike)."""

    @property
    def base_url(self) -> httpx2.URL: ...

    @property
    def auth_headers(self) -> dict[str, str]: ...

    @property
    def default_headers(self) -> Mapping[str, object]: ...

    def platform_headers(self) -> dict[str, str]: ...

    # The SDK's own mapping of an HTTP error response to its error classes: private, in the
    # base client both SDKs are generated from (tests/integration/test_sdk_post.py).
    def _make_status_error_from_response(self, response: httpx2.Response) -> Exception: ...


class _RequestError(Protocol):
    """The SDKs' `APITimeoutError` and `APIConnectionError`, made from the failed request."""

    def __call__(self, *, request: httpx2.Request) -> Exception: ...


class SdkPost:
    """Streamed POSTs of an encoded body to one path of an official SDK's API, lean.

    The request goes over the SDK's own HTTP client (`DefaultAioHttpClient`, its aiohttp
    transport) with the SDK's headers (its auth, API version, user agent and platform
    headers, read from the client once), and a failure comes back as the SDK's own error:
    `timeout_error` or `connection_error` for a request that got no answer, and for an HTTP
    error the class the client's own mapping of status and body gives. What the SDK's
    per-request pipeline does besides is skipped: it copied and validated pydantic request
    options, merged the headers again and ran its retry loop (ours are in
    `core/providers/reliable.py`) for every call, about 0.6 ms of CPU a call on a 2-core
    machine, as much as the rest of the client's work together (docs/performance.md). Left
    out with it: the retry-count and timeout telemetry headers that pipeline makes per
    request, and what the SDK would run around a request when configured for it (the
    Anthropic SDK's OpenTelemetry spans and trace headers, client middleware, a custom
    auth): none is configured here. The headers are read once, so an API key the SDK would
    refresh per request (a key provider) is not supported: the providers take plain keys.
    """

    def __init__(
        self,
        client: _SdkClient,
        http: httpx2.AsyncClient,
        path: str,
        *,
        timeout_error: _RequestError,
        connection_error: _RequestError,
    ) -> None:
        self._client = client
        self._http = http
        # Joined as the SDK joins a path to its base URL (which ends with "/").
        base = client.base_url
        self._url = base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode())
        self._timeout_error = timeout_error
        self._connection_error = connection_error
        self._headers: httpx2.Headers | None = None

    def _sdk_headers(self) -> httpx2.Headers:
        """The client's headers as its own requests carry them: merged as the SDK merges
        them, whatever their case (a later one replaces an earlier one; `Omit` removes)."""
        headers = httpx2.Headers()
        for source in (self._client.auth_headers, self._client.default_headers):
            for name, value in source.items():
                if isinstance(value, str):
                    headers[name] = value
                elif name in headers:
                    del headers[name]
        return headers

    async def __call__(self, body: bytes) -> httpx2.Response:
        """Send `body`; the response, status 2xx, its body still to be streamed."""
        headers = self._headers
        if headers is None:
            # The platform headers read files the first time, so they are asked for in a
            # thread (as the SDK does); the SDK keeps them (a cache of its module), and the
            # rest is read here, in the event loop (one header names the async library).
            await asyncio.to_thread(self._client.platform_headers)
            headers = self._headers = self._sdk_headers()
        request = self._http.build_request("POST", self._url, content=body, headers=headers)
        try:
            response = await self._http.send(request, stream=True)
            if response.is_success:
                return response
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx2.TimeoutException as exc:
            raise self._timeout_error(request=request) from exc
        except Exception as exc:
            # Anything else that kept the request from an answer (a refused or dropped
            # connection, a malformed response from a proxy): the SDK's connection error, which
            # our retries and fallback know (the Anthropic SDK's own path does the same; the
            # OpenAI SDK's let such an error through as it came, past them).
            raise self._connection_error(request=request) from exc
        raise self._client._make_status_error_from_response(response)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return _bounded(float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return _bounded(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return _bounded(when.timestamp() - time.time())


def _bounded(seconds: float) -> float | None:
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def tool_call_from_json(call_id: str, name: str, raw: str) -> ToolCall:
    """A `ToolCall` from streamed argument text; invalid JSON is kept raw for the runtime."""
    text = raw.strip() or "{}"
    try:
        arguments: Any = json.loads(text)
    except json.JSONDecodeError:
        return ToolCall(id=call_id, name=name, raw_arguments=raw)
    if not isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw)
    return ToolCall(id=call_id, name=name, arguments=arguments)
