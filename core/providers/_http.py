"""Helpers shared by the HTTP API providers (never vendor formats: those stay in each module)."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from core.messages import ToolCall

__all__ = ["dumps", "encode_body", "parse_retry_after", "tool_call_from_json"]

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
