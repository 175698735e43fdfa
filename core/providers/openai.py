"""Chat Completions through the official `openai` SDK: OpenAI and every compatible server.

Ollama, vLLM, llama.cpp and OpenRouter speak the same API at another base URL. The request
body is encoded here (each message once, then reused) and sent with the SDK's documented
low-level `post` (its headers, auth, errors and transport), skipping the typed-parameter
transform of `chat.completions.create`, which walks the whole history on every call. The
stream is decoded by the SDK (`AsyncStream[object]`: its SSE decoding and its errors) as plain
dicts: no pydantic chunk model is built per event, which had been most of a turn's
client-side cost.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

import httpx2
import openai

from core.errors import ProviderError, ProviderErrorKind
from core.events import Finished, ModelEvent, StopReason, TextDelta
from core.messages import ImagePart, Message, TextPart, Usage
from core.providers._http import dumps, encode_body, parse_retry_after, tool_call_from_json
from core.providers.base import ModelRequest, ToolSpec
from core.providers.defaults import DEFAULT_MODELS
from core.providers.idle import idle_limited

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAIProvider", "classify_openai_error"]

DEFAULT_OPENAI_MODEL = DEFAULT_MODELS["openai"]

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
# The generic code `server_error` is not here: the status says more (503 overloaded, 504 timeout).
_CODES: dict[str, ProviderErrorKind] = {
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "billing",
    "billing_hard_limit_reached": "billing",
    "invalid_api_key": "auth",
    "model_not_found": "model_not_found",
    "context_length_exceeded": "context_overflow",
    "string_above_max_length": "context_overflow",
    "content_filter": "content_blocked",
    "content_policy_violation": "content_blocked",
}
_STATUSES: dict[int, ProviderErrorKind] = {
    400: "bad_request",
    401: "auth",
    402: "billing",
    403: "auth",
    404: "model_not_found",
    408: "timeout",
    413: "context_overflow",
    422: "bad_request",
    429: "rate_limit",
    503: "overloaded",
    504: "timeout",
}


class OpenAIProvider:
    """Chat Completions models, streaming, at the official or any compatible endpoint."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        key_variable: str = "OPENAI_API_KEY",
        timeout: float = 600.0,
        stream_idle_timeout: float | None = None,
    ) -> None:
        # Retries are ours (tenacity, with a total bound); the SDK's would stack on top.
        # The SDK's aiohttp transport: its connection pool costs a fraction of the default
        # one's CPU per request, whose every request checked each pooled connection
        # (docs/performance.md, W3).
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=openai.DefaultAioHttpClient(timeout=timeout),
        )
        self._key_variable = key_variable
        # Once a stream's answer began, the longest wait for its next event
        # (core/providers/idle.py); None: no limit.
        self._idle_timeout = stream_idle_timeout
        host = urlparse(str(self._client.base_url)).hostname or ""
        # OpenAI's newer models refuse `max_tokens`; compatible servers mostly only know it.
        self._max_tokens_field = (
            "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        )

    @property
    def name(self) -> str:
        return "openai"

    async def aclose(self) -> None:
        """Close the HTTP connection pool; the provider cannot be used afterwards."""
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one Chat Completions call as model events."""
        try:
            if not request.stream:
                answer = await self._post_whole(self._body(request))
                for event in self._whole_events(answer, request.model):
                    yield event
                return
            response = await self._post(self._body(request))
            async with response:
                async for event in self._events(response, request.model):
                    yield event
        except openai.APIError as exc:
            raise classify_openai_error(exc, self._key_variable) from exc

    async def _post(self, body: bytes) -> openai.AsyncStream[object]:
        """The streamed response to `body`, through the SDK's public low-level `post`; every
        failure to get an answer raised as one of the SDK's errors."""
        try:
            # Chunks as decoded JSON: building a ChatCompletionChunk model for each of them
            # cost more than everything else the client does in a turn.
            return await self._client.post(
                "/chat/completions",
                cast_to=object,
                content=body,
                # The authentication `chat.completions.create` asks for.
                options={"security": {"bearer_auth": True}},
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
        except openai.APIError:
            raise
        except Exception as exc:
            # The SDK lets a transport error it does not map through as it came (a malformed
            # response, aiohttp's `ClientResponseError`): it kept the request from an answer,
            # so it is the connection error our retries and fallback know.
            url = f"{self._client.base_url}chat/completions"
            raise openai.APIConnectionError(request=httpx2.Request("POST", url)) from exc

    async def _post_whole(self, body: bytes) -> object:
        """The whole (non-streamed) answer to `body` as decoded JSON, through the same `post`."""
        try:
            return await self._client.post(
                "/chat/completions",
                cast_to=object,
                content=body,
                options={"security": {"bearer_auth": True}},
            )
        except openai.APIError:
            raise
        except Exception as exc:
            url = f"{self._client.base_url}chat/completions"
            raise openai.APIConnectionError(request=httpx2.Request("POST", url)) from exc

    def _body(self, request: ModelRequest) -> bytes:
        """The request as JSON; each message is translated and encoded once, later steps and
        turns reuse it."""
        messages: list[str] = []
        if request.system:
            messages.append(dumps({"role": "system", "content": request.system}))
        if request.turn_context:
            messages.append(dumps({"role": "system", "content": request.turn_context}))
        for message in request.messages:
            encoded = message.derived("openai", _encoded)
            if encoded is not None:
                messages.append(encoded)
        fields: dict[str, Any] = {
            "model": request.model,
            "stream": request.stream,
            self._max_tokens_field: request.max_tokens,
        }
        if request.stream:
            fields["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            fields["temperature"] = request.temperature
        tools = (
            f"[{','.join(t.derived('openai', _tool_json) for t in request.tools)}]"
            if request.tools
            else None
        )
        return encode_body(fields, f"[{','.join(messages)}]", tools=tools)

    async def _events(
        self, response: openai.AsyncStream[object], model: str
    ) -> AsyncIterator[ModelEvent]:
        usage = Usage()
        stop: StopReason = "end_turn"
        ended = False
        calls: dict[int, tuple[list[str], list[str], list[str]]] = {}
        async for chunk in idle_limited(
            response, self._idle_timeout, provider=self.name, begins=_answer_begins
        ):
            if not isinstance(chunk, dict):
                continue
            reported = chunk.get("usage")
            if isinstance(reported, dict):
                usage = _usage(reported)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                text = delta.get("content")
                if text:
                    yield TextDelta(text=text)
                for fragment in delta.get("tool_calls") or ():
                    _add_fragment(calls, fragment)
                reason = choice.get("finish_reason")
                if reason:
                    ended = True
                    stop = _STOP_REASONS.get(reason, "other")
        if not ended:
            # The connection closed before the answer said it was done: whatever came is a
            # fragment, and must not be taken (or stored) for the whole answer.
            raise ProviderError(
                "server", "openai's answer was cut off before its end", provider=self.name
            )
        for index in sorted(calls):
            ids, names, arguments = calls[index]
            # Some compatible servers send no id; the runtime needs one to pair the result.
            call_id = ids[0] if ids else f"call_{index}"
            yield tool_call_from_json(call_id, "".join(names), "".join(arguments))
        if calls and stop == "end_turn":
            stop = "tool_use"
        yield Finished(stop_reason=stop, usage=usage, provider=self.name, model=model)

    def _whole_events(self, answer: object, model: str) -> Iterator[ModelEvent]:
        """The events of a non-streamed answer: its text, its tool calls, `Finished`."""
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise ProviderError(
                "server", "openai sent an answer without a choice", provider=self.name
            )
        choice = choices[0]
        message = choice.get("message") or {}
        if message.get("content"):
            yield TextDelta(text=str(message["content"]))
        calls = message.get("tool_calls") or ()
        for index, call in enumerate(calls):
            function = call.get("function") or {}
            yield tool_call_from_json(
                str(call.get("id") or f"call_{index}"),
                str(function.get("name") or ""),
                str(function.get("arguments") or ""),
            )
        stop = _STOP_REASONS.get(str(choice.get("finish_reason") or ""), "other")
        if calls and stop == "end_turn":
            stop = "tool_use"
        reported = answer.get("usage") if isinstance(answer, dict) else None
        usage = _usage(reported) if isinstance(reported, dict) else Usage()
        yield Finished(stop_reason=stop, usage=usage, provider=self.name, model=model)


def _usage(reported: dict[str, Any]) -> Usage:
    """Usage from a chunk's `usage`; cached prompt tokens are counted apart from the rest."""
    details = reported.get("prompt_tokens_details")
    cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    return Usage(
        input_tokens=max(int(reported.get("prompt_tokens") or 0) - cached, 0),
        output_tokens=int(reported.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _add_fragment(
    calls: dict[int, tuple[list[str], list[str], list[str]]], fragment: dict[str, Any]
) -> None:
    """Collect one streamed piece of a tool call (its id, name and argument text arrive in
    pieces, keyed by the call's index)."""
    ids, names, arguments = calls.setdefault(int(fragment.get("index") or 0), ([], [], []))
    if fragment.get("id"):
        ids.append(fragment["id"])
    function = fragment.get("function")
    if isinstance(function, dict):
        if function.get("name"):
            names.append(function["name"])
        if function.get("arguments"):
            arguments.append(function["arguments"])


def _encoded(message: Message) -> str | None:
    wire = _message(message)
    return None if wire is None else dumps(wire)


def _message(message: Message) -> dict[str, Any] | None:
    match message.role:
        case "user":
            if not message.images:
                return {"role": "user", "content": message.text}
            return {"role": "user", "content": [_part(p) for p in message.content]}
        case "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                out["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in message.tool_calls
                ]
            elif not message.text:
                return None
            return out
        case "tool":
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": message.text or "(no output)",
            }
        case _:
            return None


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    url = f"data:{part.media_type};base64,{part.base64()}"
    return {"type": "image_url", "image_url": {"url": url}}


def classify_openai_error(exc: openai.APIError, key_variable: str) -> ProviderError:
    """The `ProviderError` kind of an SDK failure, with the wait the API asked for."""
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("timeout", "openai did not answer in time", provider="openai")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError("server", f"cannot reach openai: {exc.message}", provider="openai")
    status = getattr(exc, "status_code", 0)
    code = str(exc.code or "")
    message = str(exc.message)
    kind = _CODES.get(code) or _STATUSES.get(status)
    lowered = message.lower()
    if kind in (None, "bad_request") and (
        "context length" in lowered or "context window" in lowered or "too many tokens" in lowered
    ):
        kind = "context_overflow"
    if kind is None:
        kind = "server" if status >= 500 or status == 0 else "bad_request"
    if kind == "auth":
        message = f"the API key was rejected (HTTP {status}); check {key_variable}"
    headers = exc.response.headers if isinstance(exc, openai.APIStatusError) else None
    return ProviderError(
        kind,
        f"openai {code or status}: {message}",
        provider="openai",
        retry_after=parse_retry_after(headers),
    )


def _tool_json(spec: ToolSpec) -> str:
    """A tool's definition as the API takes it, as JSON."""
    return dumps(
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
    )


def _answer_begins(chunk: object) -> bool:
    """Whether a chunk carries the answer (text, a tool call, a compatible server's
    reasoning): the idle limit counts from there, not from the role chunk that may come
    before a reasoning model has written anything (core/providers/idle.py)."""
    if not isinstance(chunk, dict):
        return False
    return any(
        isinstance(choice, dict)
        and isinstance(delta := choice.get("delta"), dict)
        and any(delta.get(field) for field in _CONTENT_FIELDS)
        for choice in chunk.get("choices") or ()
    )


_CONTENT_FIELDS = ("content", "tool_calls", "reasoning_content", "reasoning", "refusal")
