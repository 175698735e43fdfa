"""Scripted replies for the LLM API fakes, and the loopback server both vendor fakes build on.

A test appends steps with `fake.script(...)`; each request to the vendor's endpoint takes the
next step, in arrival order. A step is a reply, or a function of the request JSON that returns
one (sync or async), for answers that depend on what was asked. Requests the vendor would reject
before reaching a model (wrong key, missing fields, unknown path) take no step. A fake built
with `otherwise=` answers with that step whenever the script is empty (the benchmarks' endless
conversations), and `latency=` delays every answer like a model thinking.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Self, TypeAlias

from aiohttp import web

NO_SCRIPT_MESSAGE = "fake has no scripted response"


@dataclass(frozen=True)
class Text:
    """A text answer, streamed in deltas of `chunk` characters.

    Token counts go verbatim into each vendor's own usage fields (OpenAI: `prompt_tokens`, and
    `cache_read` as `cached_tokens`; `cache_write` exists only at Anthropic). `output_tokens`
    defaults to about one per four characters.
    """

    text: str
    chunk: int = 40
    input_tokens: int = 10
    output_tokens: int | None = None
    cache_read: int = 0
    cache_write: int = 0

    def __post_init__(self) -> None:
        if self.chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {self.chunk}")

    @property
    def reported_output_tokens(self) -> int:
        """The output token count the fake reports."""
        if self.output_tokens is not None:
            return self.output_tokens
        return max(1, len(self.text) // 4)


@dataclass(frozen=True)
class ToolUse:
    """One or more tool calls (several = parallel calls), optionally after some text.

    Each call is `(id, name, input)`; its arguments are streamed as JSON in several fragments.
    """

    calls: list[tuple[str, str, dict[str, Any]]]
    text: str = ""
    input_tokens: int = 10
    output_tokens: int = 5

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("ToolUse needs at least one call")


@dataclass(frozen=True)
class Error:
    """An HTTP error response with the vendor's error body; `kind` is the vendor's type/code.

    `headers` are sent as given, e.g. `{"retry-after": "3"}`.
    """

    status: int
    kind: str
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamError:
    """HTTP 200, the stream starts (with `after_text` if any), then an error arrives in it.

    A request that did not ask to stream gets the equivalent HTTP error instead.
    """

    kind: str
    message: str
    after_text: str = ""


@dataclass(frozen=True)
class Cut:
    """HTTP 200, the stream starts (with `text` if any), then ends cleanly without the vendor's
    end marker: what a proxy timeout or a dropped upstream leaves behind.

    A request that did not ask to stream gets an HTTP 502 instead.
    """

    text: str = ""


@dataclass(frozen=True)
class Hold:
    """HTTP 200, the stream starts (with `text`), then nothing more until the client goes away
    or the fake closes: a model still writing a long answer. A client that goes away (a
    stopped turn) sets the fake's `dropped` event.

    A request that did not ask to stream gets an HTTP 502 instead.
    """

    text: str = ""


@dataclass(frozen=True)
class Stall:
    """Accept the request, send nothing for `seconds`, then drop the connection."""

    seconds: float


Reply: TypeAlias = Text | ToolUse | Error | StreamError | Cut | Hold | Stall
Step: TypeAlias = Reply | Callable[[dict[str, Any]], Reply | Awaitable[Reply]]
Answer: TypeAlias = Text | ToolUse | StreamError | Cut | Hold


@dataclass(frozen=True)
class Recorded:
    """One request as the fake received it; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any]


def text_pieces(text: str, size: int = 40) -> list[str]:
    """`text` cut into pieces of `size` characters; none for an empty text."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def json_pieces(value: Mapping[str, Any], parts: int = 3) -> list[str]:
    """`value` as JSON cut into `parts` fragments (fewer only if the JSON is shorter)."""
    encoded = json.dumps(value)
    size = -(-len(encoded) // parts)
    return text_pieces(encoded, size)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if that is what it is."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class ScriptedLLMServer(ABC):
    """An aiohttp app on 127.0.0.1 (free port) that records requests and plays a script.

    Subclasses speak one vendor's wire format: they name the endpoint, reject what the vendor
    would reject, and render replies and errors.
    """

    _endpoint: ClassVar[str]
    _url_suffix: ClassVar[str]
    _not_found_kind: ClassVar[str]
    _no_script_kind: ClassVar[str]

    def __init__(
        self,
        *,
        api_key: str = "test-key",
        otherwise: Step | None = None,
        latency: float = 0.0,
        record: bool = True,
    ) -> None:
        """`record=False` keeps `requests` empty (a long benchmark would hoard every body)."""
        self.api_key = api_key
        self.otherwise = otherwise
        self.latency = latency
        self.record = record
        self.requests: list[Recorded] = []
        self._steps: deque[Step] = deque()
        self._ids = itertools.count(1)
        self._closing = asyncio.Event()
        # Set when a client went away from a `Hold` stream.
        self.dropped = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """The value to pass to the SDK as `base_url`."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}{self._url_suffix}"

    @property
    def pending(self) -> int:
        """How many scripted steps no request has taken yet."""
        return len(self._steps)

    def script(self, *steps: Step) -> None:
        """Append steps; each later request to the endpoint takes the next one."""
        self._steps.extend(steps)

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start serving."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that gives up (timeout) ends its handler at once.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Release stalled requests and stop serving."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}fake{next(self._ids):06d}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        if self.record:
            headers = {name.lower(): value for name, value in request.headers.items()}
            self.requests.append(Recorded(request.method, request.path, headers, body))

        if request.method != "POST" or request.path != self._endpoint:
            message = f"no route for {request.method} {request.path}"
            return self._error(404, self._not_found_kind, message)
        if (rejection := self._reject(request, parsed)) is not None:
            return rejection
        reply = await self._next_reply(body)
        streaming = body.get("stream") is True
        match reply:
            case None:
                message = f"{NO_SCRIPT_MESSAGE} (request #{len(self.requests)})"
                return self._error(500, self._no_script_kind, message)
            case Error(status=status, kind=kind, message=message, headers=extra):
                return self._error(status, kind, message, extra)
            case Stall(seconds=seconds):
                return await self._stall(request, seconds)
            case Cut() | Hold() if not streaming:
                return self._error(502, self._no_script_kind, "upstream connection lost")
            case StreamError(kind=kind, message=message) if not streaming:
                return self._error(self._status_for(kind), kind, message)
            case Text() | ToolUse() if not streaming:
                return self._complete(body, reply)
            case _:
                return await self._stream(request, body, reply)

    async def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        if self.latency:
            await asyncio.sleep(self.latency)
        if self._steps:
            step = self._steps.popleft()
        elif self.otherwise is not None:
            step = self.otherwise
        else:
            return None
        if not callable(step):
            return step
        reply = step(body)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply

    async def _stall(self, request: web.Request, seconds: float) -> web.StreamResponse:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)
        # Dropping the connection without a response is what a dead upstream looks like;
        # ending the handler as cancelled keeps aiohttp from writing a response to it.
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError

    async def _open_stream(
        self, request: web.Request, headers: Mapping[str, str]
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **headers}
        )
        await response.prepare(request)
        return response

    async def _send(
        self, response: web.StreamResponse, frames: list[bytes], *, hold: bool = False
    ) -> web.StreamResponse:
        """Write SSE frames one at a time (each is flushed), then end the stream; with `hold`,
        wait instead until the client goes away or the fake closes (`Hold`)."""
        with contextlib.suppress(ConnectionResetError):
            for frame in frames:
                await response.write(frame)
            if hold:
                try:
                    await self._closing.wait()
                except asyncio.CancelledError:  # the client went away (handler_cancellation)
                    self.dropped.set()
                    raise
            await response.write_eof()
        return response

    @abstractmethod
    def _reject(self, request: web.Request, body: object) -> web.Response | None:
        """The vendor's response to a request it would refuse (auth, shape), else None."""

    @abstractmethod
    def _error(
        self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
    ) -> web.Response:
        """A vendor-shaped HTTP error response."""

    @abstractmethod
    def _status_for(self, kind: str) -> int:
        """The HTTP status the vendor uses for an error of this kind."""

    @abstractmethod
    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Answer
    ) -> web.StreamResponse:
        """Answer a streaming request."""

    @abstractmethod
    def _complete(self, body: dict[str, Any], reply: Text | ToolUse) -> web.Response:
        """Answer a non-streaming request."""
