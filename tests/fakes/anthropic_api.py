"""A loopback fake of the Anthropic Messages API (`POST /v1/messages`), for the real SDK.

Use `AsyncAnthropic(api_key="test-key", base_url=fake.url)`. Streamed answers are the SSE
sequence the real API sends: `message_start`, `ping`, per block `content_block_start` /
`content_block_delta` / `content_block_stop`, `message_delta`, `message_stop`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web

from tests.fakes.llm_script import (
    Answer,
    Cut,
    Hold,
    ScriptedLLMServer,
    StreamError,
    Text,
    ToolUse,
    bearer_token,
    json_pieces,
    text_pieces,
)

_STATUS_BY_KIND = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_REQUIRED_FIELDS = ("model", "max_tokens", "messages")
_Event = tuple[str, dict[str, Any]]


class FakeAnthropic(ScriptedLLMServer):
    """The Messages API on 127.0.0.1; `url` is the SDK's `base_url` (no `/v1`).

    The key may come as `x-api-key` or `Authorization: Bearer`; `anthropic-version` is required.
    """

    _endpoint = "/v1/messages"
    _url_suffix = ""
    _not_found_kind = "not_found_error"
    _no_script_kind = "api_error"

    def _reject(self, request: web.Request, body: object) -> web.Response | None:
        key = request.headers.get("x-api-key") or bearer_token(request.headers.get("authorization"))
        if not key:
            return self._error(401, "authentication_error", "x-api-key header is required")
        if key != self.api_key:
            return self._error(401, "authentication_error", "invalid x-api-key")
        if "anthropic-version" not in request.headers:
            return self._error(
                400, "invalid_request_error", "anthropic-version: header is required"
            )
        if not isinstance(body, dict):
            return self._error(400, "invalid_request_error", "The request body is not valid JSON.")
        for name in _REQUIRED_FIELDS:
            if name not in body:
                return self._error(400, "invalid_request_error", f"{name}: Field required")
        return None

    def _error(
        self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        request_id = self._new_id("req_")
        payload = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": request_id,
        }
        return web.json_response(
            payload, status=status, headers={"request-id": request_id, **(headers or {})}
        )

    def _status_for(self, kind: str) -> int:
        return _STATUS_BY_KIND.get(kind, 500)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Answer
    ) -> web.StreamResponse:
        response = await self._open_stream(request, {"request-id": self._new_id("req_")})
        events = _stream_events(self._new_id("msg_"), body["model"], reply)
        frames = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
        return await self._send(response, frames, hold=isinstance(reply, Hold))

    def _complete(self, body: dict[str, Any], reply: Text | ToolUse) -> web.Response:
        message = _message(self._new_id("msg_"), body["model"], reply)
        message["content"] = _final_blocks(reply)
        message["stop_reason"] = _stop_reason(reply)
        message["usage"]["output_tokens"] = _output_tokens(reply)
        return web.json_response(message, headers={"request-id": self._new_id("req_")})


def _message(message_id: str, model: str, reply: Answer) -> dict[str, Any]:
    """The message object as `message_start` carries it: no content yet, one output token."""
    text = reply if isinstance(reply, Text) else None
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens if isinstance(reply, Text | ToolUse) else 10,
            "cache_creation_input_tokens": text.cache_write if text else 0,
            "cache_read_input_tokens": text.cache_read if text else 0,
            "output_tokens": 1,
        },
    }


def _final_blocks(reply: Text | ToolUse) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or isinstance(reply, Text):
        blocks.append({"type": "text", "text": reply.text})
    if isinstance(reply, ToolUse):
        blocks.extend(
            {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
            for call_id, name, arguments in reply.calls
        )
    return blocks


def _stop_reason(reply: Text | ToolUse) -> str:
    return "tool_use" if isinstance(reply, ToolUse) else "end_turn"


def _output_tokens(reply: Text | ToolUse) -> int:
    return reply.reported_output_tokens if isinstance(reply, Text) else reply.output_tokens


def _stream_events(message_id: str, model: str, reply: Answer) -> Iterator[_Event]:
    yield "message_start", {"type": "message_start", "message": _message(message_id, model, reply)}
    yield "ping", {"type": "ping"}
    if isinstance(reply, StreamError):
        if reply.after_text:
            yield from _text_block(0, reply.after_text, 40, stop=False)
        error = {"type": reply.kind, "message": reply.message}
        yield "error", {"type": "error", "error": error}
        return
    if isinstance(reply, Cut | Hold):
        # No content_block_stop, message_delta or message_stop: the stream just ends (or holds).
        yield from _text_block(0, reply.text, 40, stop=False)
        return
    index = 0
    if isinstance(reply, Text):
        yield from _text_block(index, reply.text, reply.chunk)
        index += 1
    elif reply.text:
        yield from _text_block(index, reply.text, 40)
        index += 1
    if isinstance(reply, ToolUse):
        for call_id, name, arguments in reply.calls:
            yield from _tool_block(index, call_id, name, arguments)
            index += 1
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    usage = {"output_tokens": _output_tokens(reply)}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def _text_block(index: int, text: str, chunk: int, *, stop: bool = True) -> Iterator[_Event]:
    block = {"type": "text", "text": ""}
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )
    for piece in text_pieces(text, chunk):
        delta = {"type": "text_delta", "text": piece}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    if stop:
        yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _tool_block(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> Iterator[_Event]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )
    # The real API opens every tool input with an empty fragment.
    for piece in ["", *json_pieces(arguments)]:
        delta = {"type": "input_json_delta", "partial_json": piece}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _block_start(index: int, block: dict[str, Any]) -> _Event:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }
