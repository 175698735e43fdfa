"""Slack Web API calls seen from Switchboard: a refusal or a failure is a `ChannelError`.

Slack answers errors as HTTP 200 with `{"ok": false, "error": …}` (slack_sdk raises
`SlackApiError`), and rate limits as HTTP 429 with `Retry-After`, which slack_sdk's retry
handler waits out before giving up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from core.errors import ChannelError

__all__ = ["Refused", "call", "refusal"]

# Errors worth trying again; any other refusal will not change by retrying.
_TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class Refused(ChannelError):
    """Slack answered `ok: false`; `error` is its error code."""

    def __init__(
        self, message: str, error: str, *, retry_after: float | None, permanent: bool
    ) -> None:
        super().__init__(message, retry_after=retry_after, permanent=permanent)
        self.error = error


async def call(request: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
    """Await a Web API call, turning its failures into `ChannelError`."""
    try:
        return await request
    except SlackApiError as exc:
        raise refusal(exc) from exc
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        raise ChannelError(f"slack unreachable: {exc}") from exc


def refusal(exc: SlackApiError) -> Refused:
    """The `ChannelError` for an error answer: retryable (after `Retry-After` for a 429) or
    permanent."""
    response = exc.response
    status = int(getattr(response, "status_code", 200) or 200)
    error = str(response.get("error") or f"HTTP {status}")
    method = str(getattr(response, "api_url", "")).rpartition("/")[2] or "a call"
    if status == 429 or error == "ratelimited":
        retry_after = _retry_after(getattr(response, "headers", {}) or {})
        return Refused(
            f"slack rate limit on {method}", error, retry_after=retry_after, permanent=False
        )
    transient = error in _TRANSIENT or status >= 500
    return Refused(
        f"slack refused {method}: {error}", error, retry_after=None, permanent=not transient
    )


def _retry_after(headers: Mapping[str, Any]) -> float:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            first = value[0] if isinstance(value, list | tuple) else value
            with contextlib.suppress(TypeError, ValueError):
                return max(float(first), 1.0)
    return 1.0
