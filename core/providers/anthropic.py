"""The Anthropic Messages API through the official `anthropic` SDK.

Wire formats stay here. Requests carry cache breakpoints on the tools, the system prompt and
the newest message: the first two are byte-identical from turn to turn of a session, so each
turn reads the prefix the previous one wrote. The stream is read as plain dicts
(`AsyncStream[object]`): the SDK decodes the SSE and raises its errors, without a pydantic
model per event.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import anthropic

from core.errors import ProviderError, ProviderErrorKind
from core.events import Finished, ModelEvent, StopReason, TextDelta
from core.messages import ImagePart, Message, TextPart, ToolCall, Usage
from core.providers._http import dumps, encode_body, parse_retry_after, tool_call_from_json
from core.providers.base import ModelRequest
from core.providers.defaults import DEFAULT_MODELS
from core.providers.idle import idle_limited

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "AnthropicProvider", "classify_anthropic_error"]

DEFAULT_ANTHROPIC_MODEL = DEFAULT_MODELS["anthropic"]

_EPHEMERAL = {"type": "ephemeral"}
# Conversations whose request JSON is kept to be extended by the next call (one per session
# in flight; the least recently used goes first).
_KEPT_CONVERSATIONS = 64
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "content_filter",
}
_ERROR_TYPES: dict[str, ProviderErrorKind] = {
    "rate_limit_error": "rate_limit",
    "overloaded_error": "overloaded",
    "api_error": "server",
    "timeout_error": "timeout",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "billing",
    "not_found_error": "model_not_found",
    "request_too_large": "context_overflow",
}
_STATUSES: dict[int, ProviderErrorKind] = {
    401: "auth",
    402: "billing",
    403: "auth",
    404: "model_not_found",
    408: "timeout",
    413: "context_overflow",
    429: "rate_limit",
    529: "overloaded",
}


class AnthropicProvider:
    """Claude models over the Messages API, streaming."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        key_variable: str = "ANTHROPIC_API_KEY",
        timeout: float = 600.0,
        stream_idle_timeout: float | None = None,
    ) -> None:
        # Retries are ours (tenacity, with a total bound); the SDK's would stack on top. The
        # SDK's aiohttp transport, as for OpenAI (core/providers/openai.py).
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout),
        )
        self._key_variable = key_variable
        # Once a stream's answer began, the longest wait for its next event
        # (core/providers/idle.py); None: no limit.
        self._idle_timeout = stream_idle_timeout
        self._conversations: OrderedDict[int, _Conversation] = OrderedDict()

    @property
    def name(self) -> str:
        return "anthropic"

    async def aclose(self) -> None:
        """Close the HTTP connection pool; the provider cannot be used afterwards."""
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one Messages API call as model events."""
        try:
            # The body encoded here, sent as bytes through the SDK's documented low-level
            # `post` (its auth, errors and stream decoding), skips what grows with the
            # conversation: the typed transform of `messages.create` and the copy the SDK
            # makes of a `body=` (together about 10 ms a call at 800 messages). Each message
            # is encoded once and reused by later steps and turns.
            body = encode_body(self._params(request), self._messages_json(request.messages))
            # Events as decoded JSON: a typed model per event is work nobody reads.
            if not request.stream:
                answer = await self._client.post("/v1/messages", cast_to=object, content=body)
                for event in self._whole_events(answer, request.model):
                    yield event
                return
            response = await self._client.post(
                "/v1/messages",
                cast_to=object,
                content=body,
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
            )
            async with response:
                async for event in self._events(response, request.model):
                    yield event
        except anthropic.APIError as exc:
            raise classify_anthropic_error(exc, self._key_variable) from exc

    def _messages_json(self, messages: list[Message]) -> str:
        """The `messages` member, extending the JSON made for this conversation's last call
        when these messages start with the same ones (each call of a session adds a few):
        merging roles over the whole history on every call grew with the conversation."""
        if not messages:
            return "[]"
        key = id(messages[0])
        conversation = self._conversations.get(key)
        if conversation is None or not conversation.continued_by(messages):
            conversation = _Conversation()
        conversation.extend(messages[len(conversation.messages) :])
        self._conversations[key] = conversation
        self._conversations.move_to_end(key)
        while len(self._conversations) > _KEPT_CONVERSATIONS:
            self._conversations.popitem(last=False)
        return conversation.json()

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "stream": request.stream,
        }
        if request.system:
            params["system"] = [
                {"type": "text", "text": request.system, "cache_control": _EPHEMERAL}
            ]
            if request.turn_context:
                params["system"].append({"type": "text", "text": request.turn_context})
        if request.tools:
            tools: list[dict[str, Any]] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
            params["tools"] = tools
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

    async def _events(
        self, response: anthropic.AsyncStream[object], model: str
    ) -> AsyncIterator[ModelEvent]:
        usage = Usage()
        stop: StopReason = "end_turn"
        ended = False
        tools: dict[int, tuple[str, str, list[str]]] = {}
        async for event in idle_limited(
            response, self._idle_timeout, provider=self.name, begins=_answer_begins
        ):
            if not isinstance(event, dict):
                continue
            index = event.get("index")
            match event.get("type"):
                case "message_stop":
                    ended = True
                case "message_start":
                    usage = _usage((event.get("message") or {}).get("usage") or {})
                case "content_block_start":
                    block = event.get("content_block") or {}
                    if block.get("type") == "tool_use" and isinstance(index, int):
                        tools[index] = (str(block.get("id", "")), str(block.get("name", "")), [])
                case "content_block_delta":
                    delta = event.get("delta") or {}
                    kind = delta.get("type")
                    if kind == "text_delta" and delta.get("text"):
                        yield TextDelta(text=delta["text"])
                    elif kind == "input_json_delta" and index in tools:
                        tools[index][2].append(delta.get("partial_json") or "")
                case "content_block_stop" if index in tools:
                    call_id, name, parts = tools.pop(index)
                    yield tool_call_from_json(call_id, name, "".join(parts))
                case "message_delta":
                    reason = (event.get("delta") or {}).get("stop_reason") or ""
                    stop = _STOP_REASONS.get(reason, "other")
                    output = (event.get("usage") or {}).get("output_tokens")
                    if output is not None:
                        usage = usage.model_copy(update={"output_tokens": int(output)})
        if not ended:
            # The connection closed before `message_stop`: whatever came is a fragment, and
            # must not be taken (or stored) for the whole answer.
            raise ProviderError(
                "server", "anthropic's answer was cut off before its end", provider=self.name
            )
        yield Finished(stop_reason=stop, usage=usage, provider=self.name, model=model)

    def _whole_events(self, answer: object, model: str) -> Iterator[ModelEvent]:
        """The events of a non-streamed message: its text, its tool calls, `Finished`."""
        if not isinstance(answer, dict) or answer.get("type") != "message":
            raise ProviderError("server", "anthropic sent no message", provider=self.name)
        for block in answer.get("content") or ():
            if block.get("type") == "text" and block.get("text"):
                yield TextDelta(text=str(block["text"]))
            elif block.get("type") == "tool_use":
                arguments = block.get("input")
                yield tool_call_from_json(
                    str(block.get("id", "")), str(block.get("name", "")), dumps(arguments or {})
                )
        stop = _STOP_REASONS.get(str(answer.get("stop_reason") or ""), "other")
        usage = _usage(answer.get("usage") or {})
        yield Finished(stop_reason=stop, usage=usage, provider=self.name, model=model)


def _usage(reported: dict[str, Any]) -> Usage:
    """Usage from `message_start`'s message (absent counts are zero)."""
    return Usage(
        input_tokens=int(reported.get("input_tokens") or 0),
        output_tokens=int(reported.get("output_tokens") or 0),
        cache_read_tokens=int(reported.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(reported.get("cache_creation_input_tokens") or 0),
    )


class _Conversation:
    """Core messages as Messages API turns, built a message at a time: tool results are user
    turns, consecutive messages of one role are one turn, turns before the first user turn
    are left out, and the newest block is a cache breakpoint too (the next turn reads the
    whole conversation so far from the cache)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._closed: list[str] = []  # the JSON of every finished turn that is sent
        self._role: str | None = None  # the open turn: the next message may join it
        self._blocks: list[str] = []
        self._sent = False  # whether the open turn is sent (a user turn came before it)
        self._newest: dict[str, Any] | None = None

    def continued_by(self, messages: Sequence[Message]) -> bool:
        """Whether `messages` starts with the messages already taken in."""
        taken = len(self.messages)
        # List equality compares by identity first: the same objects cost no model __eq__.
        return len(messages) >= taken and list(messages[:taken]) == self.messages

    def extend(self, messages: Sequence[Message]) -> None:
        """Take in the next messages."""
        for message in messages:
            self.messages.append(message)
            role, blocks, encoded = message.derived("anthropic", _encoded_blocks)
            if not blocks:
                continue
            if role == self._role:
                self._blocks.extend(encoded)
            else:
                if self._role is not None and self._sent:
                    self._closed.append(_turn_json(self._role, self._blocks))
                self._sent = self._sent or role == "user"
                self._role, self._blocks = role, list(encoded)
            self._newest = blocks[-1]

    def json(self) -> str:
        """The `messages` member, as JSON."""
        if self._role is None or not self._sent or self._newest is None:
            return "[]"
        newest = dumps({**self._newest, "cache_control": _EPHEMERAL})
        last = _turn_json(self._role, [*self._blocks[:-1], newest])
        return f"[{','.join([*self._closed, last])}]"


def _messages_json(messages: list[Message]) -> str:
    """Core messages as Messages API turns, in JSON (see `_Conversation`)."""
    conversation = _Conversation()
    conversation.extend(messages)
    return conversation.json()


def _turn_json(role: str, blocks: list[str]) -> str:
    return f'{{"role":"{role}","content":[{",".join(blocks)}]}}'


def _encoded_blocks(message: Message) -> tuple[str, list[dict[str, Any]], list[str]]:
    role, blocks = _blocks(message)
    return role, blocks, [dumps(block) for block in blocks]


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    match message.role:
        case "tool":
            return "user", [
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.text or "(no output)",
                    "is_error": message.is_error,
                }
            ]
        case "assistant":
            blocks = [_part(p) for p in message.content if not _empty(p)]
            blocks.extend(_tool_use(c) for c in message.tool_calls)
            return "assistant", blocks
        case "user":
            return "user", [_part(p) for p in message.content if not _empty(p)]
        case _:
            return "system", []


def _empty(part: TextPart | ImagePart) -> bool:
    return isinstance(part, TextPart) and not part.text.strip()


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.base64()},
    }


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def classify_anthropic_error(exc: anthropic.APIError, key_variable: str) -> ProviderError:
    """The `ProviderError` kind of an SDK failure, with the wait the API asked for."""
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError("timeout", "anthropic did not answer in time", provider="anthropic")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(
            "server", f"cannot reach anthropic: {exc.message}", provider="anthropic"
        )
    status = getattr(exc, "status_code", 0)
    error_type, message = _error_details(exc.body, exc.message)
    kind = _ERROR_TYPES.get(error_type) or _STATUSES.get(status)
    if error_type == "invalid_request_error" or kind is None:
        lowered = message.lower()
        if "prompt is too long" in lowered or "too many tokens" in lowered:
            kind = "context_overflow"
        elif "credit balance" in lowered or "billing" in lowered:
            kind = "billing"
        elif kind is None and status >= 500:
            kind = "server"
        elif kind is None:
            kind = "bad_request"
    if kind == "auth":
        message = f"the API key was rejected (HTTP {status}); check {key_variable}"
    headers = exc.response.headers if isinstance(exc, anthropic.APIStatusError) else None
    return ProviderError(
        kind,
        f"anthropic {error_type or status}: {message}",
        provider="anthropic",
        retry_after=parse_retry_after(headers),
    )


def _error_details(body: object, fallback: str) -> tuple[str, str]:
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("type", "")), str(error.get("message", fallback))
    return "", fallback


def _answer_begins(event: object) -> bool:
    """Whether a stream event carries a piece of the answer (text, a tool call's input,
    thinking): the idle limit counts from there, not from `message_start` or a block's
    opening (core/providers/idle.py)."""
    return isinstance(event, dict) and event.get("type") == "content_block_delta"
