"""A loopback fake of the OpenAI Chat Completions API (`POST /v1/chat/completions`), of
audio transcriptions (`POST /v1/audio/transcriptions`, multipart, `{"text": ...}` back) and of
image generations (`POST /v1/images/generations`, JSON, `{"data": [{"b64_json": ...}]}` back).

Use `AsyncOpenAI(api_key="test-key", base_url=fake.url)`. Transcriptions play their own
script (`transcribe`): a transcript, an `Error` or a `Stall`; each is recorded in
`transcriptions`. Image generations likewise (`draw`: PNG bytes, an `Error` or a `Stall`;
none scripted: a small PNG), each recorded in `images`. Streamed answers are `data:` lines of
`chat.completion.chunk` objects ending with `data: [DONE]`; with
`stream_options={"include_usage": True}` a last chunk with `choices: []` carries the usage.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

from tests.fakes.llm_script import (
    Answer,
    Cut,
    Error,
    Hold,
    ScriptedLLMServer,
    Stall,
    Step,
    StreamError,
    Text,
    ToolUse,
    bearer_token,
    json_pieces,
    text_pieces,
)

_STATUS_BY_CODE = {
    "invalid_api_key": 401,
    "model_not_found": 404,
    "context_length_exceeded": 400,
    "content_filter": 400,
    "invalid_request_error": 400,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
}
# The `type` the real API pairs with a code, where it is not the generic one.
_TYPE_BY_CODE = {
    "rate_limit_exceeded": "requests",
    "insufficient_quota": "insufficient_quota",
    "server_error": "server_error",
}
_PARAM_BY_CODE = {"context_length_exceeded": "messages"}
_FINGERPRINT = "fp_fake"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
IMAGES = "/v1/images/generations"
# The models that answer only in base64 and refuse `response_format` (as OpenAI's do).
_BASE64_ONLY_PREFIX = "gpt-image"
# What the transcription endpoint takes, by file name suffix (as OpenAI documents it).
_AUDIO_SUFFIXES = (
    ".flac",
    ".m4a",
    ".mp3",
    ".mp4",
    ".mpeg",
    ".mpga",
    ".oga",
    ".ogg",
    ".wav",
    ".webm",
)


@dataclass(frozen=True)
class Transcription:
    """One transcription request as the fake received it."""

    model: str
    filename: str
    content_type: str
    data: bytes
    api_key: str | None


@dataclass(frozen=True)
class ImageRequest:
    """One image generation request as the fake received it."""

    model: str
    prompt: str
    size: str | None
    response_format: str | None
    api_key: str | None


def tiny_png(red: int = 200, green: int = 30, blue: int = 30) -> bytes:
    """A valid 2x2 PNG of one colour: what the fake draws when nothing else was scripted."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([red, green, blue]) * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def error_object(kind: str, message: str, status: int = 500) -> dict[str, Any]:
    """The `{"message", "type", "param", "code"}` object OpenAI puts under `"error"`."""
    generic = "server_error" if status >= 500 else "invalid_request_error"
    return {
        "message": message,
        "type": _TYPE_BY_CODE.get(kind, generic),
        "param": _PARAM_BY_CODE.get(kind),
        "code": kind,
    }


class FakeOpenAI(ScriptedLLMServer):
    """Chat Completions on 127.0.0.1; `url` is the SDK's `base_url` (ends in `/v1`)."""

    _endpoint = "/v1/chat/completions"
    _url_suffix = "/v1"
    _not_found_kind = "unknown_url"
    _no_script_kind = "server_error"

    def __init__(
        self,
        *,
        api_key: str = "test-key",
        otherwise: Step | None = None,
        latency: float = 0.0,
        record: bool = True,
    ) -> None:
        """As `ScriptedLLMServer`'s."""
        super().__init__(api_key=api_key, otherwise=otherwise, latency=latency, record=record)
        self.transcriptions: list[Transcription] = []
        self._transcripts: deque[str | Error | Stall] = deque()
        self.images: list[ImageRequest] = []
        self._drawings: deque[bytes | Error | Stall] = deque()

    def transcribe(self, *answers: str | Error | Stall) -> None:
        """Append answers; each later transcription request takes the next one (none left:
        HTTP 500)."""
        self._transcripts.extend(answers)

    def draw(self, *answers: bytes | Error | Stall) -> None:
        """Append answers to image generation requests (none left: `tiny_png()`)."""
        self._drawings.extend(answers)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and request.path == TRANSCRIPTIONS:
            return await self._transcription(request)
        if request.method == "POST" and request.path == IMAGES:
            return await self._image(request)
        return await super()._handle(request)

    async def _image(self, request: web.Request) -> web.StreamResponse:
        key = bearer_token(request.headers.get("authorization"))
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._invalid(400, "We could not parse the JSON body of your request.")
        model = str(body.get("model", ""))
        response_format = body.get("response_format")
        self.images.append(
            ImageRequest(model, str(body.get("prompt", "")), body.get("size"), response_format, key)
        )
        if key != self.api_key:
            return self._invalid(401, "Incorrect API key provided.", "invalid_api_key")
        if not body.get("prompt"):
            message = "Missing required parameter: 'prompt'."
            return self._invalid(400, message, "missing_required_parameter", param="prompt")
        if model.startswith(_BASE64_ONLY_PREFIX) and response_format is not None:
            message = f"Unknown parameter: 'response_format' is not supported for {model}."
            return self._invalid(400, message, "unknown_parameter", param="response_format")
        answer = self._drawings.popleft() if self._drawings else tiny_png()
        match answer:
            case Error(status=status, kind=kind, message=message, headers=extra):
                return self._error(status, kind, message, extra)
            case Stall(seconds=seconds):
                return await self._stall(request, seconds)
            case bytes():
                encoded = base64.b64encode(answer).decode()
                return self._respond({"created": int(time.time()), "data": [{"b64_json": encoded}]})

    async def _transcription(self, request: web.Request) -> web.StreamResponse:
        key = bearer_token(request.headers.get("authorization"))
        if not request.content_type.startswith("multipart/"):
            return self._invalid(400, "Expected a multipart/form-data body.")
        fields: dict[str, str] = {}
        file: tuple[str, str, bytes] | None = None
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                content_type = part.headers.get("Content-Type", "")
                file = (part.filename, content_type, bytes(await part.read()))
            else:
                fields[part.name] = await part.text()
        if file is not None:
            filename, content_type, data = file
            record = Transcription(fields.get("model", ""), filename, content_type, data, key)
            self.transcriptions.append(record)
        if key != self.api_key:
            return self._invalid(401, "Incorrect API key provided.", "invalid_api_key")
        if file is None or "model" not in fields:
            missing = "file" if file is None else "model"
            message = f"Missing required parameter: '{missing}'."
            return self._invalid(400, message, "missing_required_parameter", param=missing)
        if not file[0].lower().endswith(_AUDIO_SUFFIXES):
            return self._invalid(400, f"Unrecognized file format: {file[0]}.")
        answer = self._transcripts.popleft() if self._transcripts else None
        match answer:
            case None:
                return self._error(500, "server_error", "no transcript scripted")
            case Error(status=status, kind=kind, message=message, headers=extra):
                return self._error(status, kind, message, extra)
            case Stall(seconds=seconds):
                return await self._stall(request, seconds)
            case str():
                return self._respond({"text": answer})

    def _reject(self, request: web.Request, body: object) -> web.Response | None:
        key = bearer_token(request.headers.get("authorization"))
        if not key:
            return self._invalid(401, "You didn't provide an API key.", code=None)
        if key != self.api_key:
            shown = f"{key[:3]}***{key[-4:]}" if len(key) > 8 else "***"
            return self._invalid(401, f"Incorrect API key provided: {shown}.", "invalid_api_key")
        if not isinstance(body, dict):
            return self._invalid(400, "We could not parse the JSON body of your request.")
        for name in ("model", "messages"):
            if name not in body:
                message = f"Missing required parameter: '{name}'."
                return self._invalid(400, message, "missing_required_parameter", param=name)
        if "stream_options" in body and body.get("stream") is not True:
            message = "The 'stream_options' parameter is only allowed when 'stream' is enabled."
            return self._invalid(400, message, param="stream_options")
        return None

    def _invalid(
        self, status: int, message: str, code: str | None = None, *, param: str | None = None
    ) -> web.Response:
        error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        return self._respond({"error": error}, status)

    def _error(
        self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        return self._respond({"error": error_object(kind, message, status)}, status, headers)

    def _respond(
        self, payload: dict[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        all_headers = {"x-request-id": self._new_id("req_"), **(headers or {})}
        return web.json_response(payload, status=status, headers=all_headers)

    def _status_for(self, kind: str) -> int:
        return _STATUS_BY_CODE.get(kind, 500)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Answer
    ) -> web.StreamResponse:
        response = await self._open_stream(request, {"x-request-id": self._new_id("req_")})
        options = body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = _Chunks(self._new_id("chatcmpl-"), body["model"], with_usage)
        frames = [f"data: {json.dumps(data)}\n\n".encode() for data in chunks.events(reply)]
        if not isinstance(reply, StreamError | Cut | Hold):
            frames.append(b"data: [DONE]\n\n")
        return await self._send(response, frames, hold=isinstance(reply, Hold))

    def _complete(self, body: dict[str, Any], reply: Text | ToolUse) -> web.Response:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
        }
        if isinstance(reply, ToolUse):
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for call_id, name, arguments in reply.calls
            ]
        completion = {
            "id": self._new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": _FINGERPRINT,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _finish_reason(reply),
                }
            ],
            "usage": _usage(reply),
        }
        return self._respond(completion)


def _finish_reason(reply: Text | ToolUse) -> str:
    return "tool_calls" if isinstance(reply, ToolUse) else "stop"


def _usage(reply: Text | ToolUse) -> dict[str, Any]:
    if isinstance(reply, Text):
        prompt, completion, cached = (
            reply.input_tokens,
            reply.reported_output_tokens,
            reply.cache_read,
        )
    else:
        prompt, completion, cached = reply.input_tokens, reply.output_tokens, 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


class _Chunks:
    """Builds the `chat.completion.chunk` objects of one streamed answer."""

    def __init__(self, completion_id: str, model: str, with_usage: bool) -> None:
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": _FINGERPRINT,
        }
        self._with_usage = with_usage

    def events(self, reply: Answer) -> Iterator[dict[str, Any]]:
        """Every `data:` payload of the stream, before `[DONE]`."""
        if isinstance(reply, StreamError):
            yield self._chunk({"role": "assistant", "content": "", "refusal": None})
            for piece in text_pieces(reply.after_text):
                yield self._chunk({"content": piece})
            yield {"error": error_object(reply.kind, reply.message)}
            return
        if isinstance(reply, Cut | Hold):
            # No finish_reason, no usage chunk, no [DONE]: the stream just ends (or holds).
            yield self._chunk({"role": "assistant", "content": "", "refusal": None})
            for piece in text_pieces(reply.text):
                yield self._chunk({"content": piece})
            return
        content = "" if isinstance(reply, Text) or reply.text else None
        yield self._chunk({"role": "assistant", "content": content, "refusal": None})
        chunk = reply.chunk if isinstance(reply, Text) else 40
        for piece in text_pieces(reply.text, chunk):
            yield self._chunk({"content": piece})
        if isinstance(reply, ToolUse):
            for index, (call_id, name, arguments) in enumerate(reply.calls):
                yield from self._tool_call(index, call_id, name, arguments)
        yield self._chunk({}, finish_reason=_finish_reason(reply))
        if self._with_usage:
            yield {**self._base, "choices": [], "usage": _usage(reply)}

    def _tool_call(
        self, index: int, call_id: str, name: str, arguments: dict[str, Any]
    ) -> Iterator[dict[str, Any]]:
        # id, type and name come only with a call's first fragment; later ones match on index.
        opening = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        yield self._chunk({"tool_calls": [opening]})
        for piece in json_pieces(arguments):
            fragment = {"index": index, "function": {"arguments": piece}}
            yield self._chunk({"tool_calls": [fragment]})

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk: dict[str, Any] = {**self._base, "choices": [choice]}
        if self._with_usage:
            chunk["usage"] = None
        return chunk
