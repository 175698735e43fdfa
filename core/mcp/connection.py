"""One MCP server's connection: a task owning its session, starting a new one when it breaks.

The task owns the SDK's transport and `ClientSession` context managers (anyio requires them
to be entered and left in the same task). The end of the server's messages, a call that
finds the connection closed, or a streamable-HTTP server that no longer knows the session
(HTTP 404, the spec's word for "start a new session"; some servers answer 400 naming the
session) marks it broken; the task then leaves the session and starts a new one (tenacity's
exponential backoff between failed attempts), and calls wait a little for it. A call refused
for its session is made once more on the new one: the server never ran it.

Closing never cancels the task while a session is up: leaving the session normally lets the
SDK close a stdio server's input, wait, terminate and then kill it, which a cancellation
would cut short and leave the server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from core.errors import ToolError
from core.mcp.settings import McpServerSettings
from core.mcp.tools import render_result
from core.tasks import cancel_and_wait

__all__ = ["CLOSE_PATIENCE", "Connection", "Listed", "reason"]

log = logging.getLogger(__name__)

# Failures that mean the connection is gone (the session is started again).
_TRANSPORT_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.TransportError,
    OSError,
)
# Connect and read timeouts of the HTTP client; a streamable-HTTP server may hold a stream.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# The session header of streamable HTTP (header names are case-insensitive).
_SESSION_HEADER = "mcp-session-id"
# How long closing waits for a server to stop before cutting its task short. The SDK's own
# sequence for a stdio server that ignores the end of its input takes about 6.5 s (2 s after
# closing its input, SIGTERM; 2 s later, SIGKILL; up to 2 s to see it gone).
CLOSE_PATIENCE = 8.0

# Called with the server's name and its tools each time they are listed after the first.
Listed = Callable[[str, list[mcp_types.Tool]], None]


def _client_info() -> mcp_types.Implementation:
    """How the client introduces itself to servers: `switchboard` and the package version."""
    try:
        installed = version("switchboard")
    except PackageNotFoundError:
        installed = "unknown"
    return mcp_types.Implementation(name="switchboard", version=installed)


class Connection:
    """One MCP server: a task owning its session, restarting it when it breaks."""

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        *,
        backoff: float,
        backoff_max: float,
        errlog: TextIO | None,
        on_listed: Listed,
    ) -> None:
        self.name = name
        self.settings = settings
        self._errlog = errlog
        self._on_listed = on_listed
        self.restarts = 0
        self._backoff = backoff
        self._backoff_max = backoff_max
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._down = asyncio.Event()
        self._down.set()
        self._broken = asyncio.Event()
        self._closing = asyncio.Event()
        self._tools_changed = asyncio.Event()
        # Set by the HTTP client when the server answered 404 to a request of this session.
        self._session_unknown = False
        self._listed: asyncio.Future[list[mcp_types.Tool]] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> list[mcp_types.Tool]:
        """Start the server and list its tools; raises what made it fail."""
        self._listed = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(), name=f"mcp:{self.name}")
        waiting: set[asyncio.Future[Any]] = {self._listed, self._task}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not self._listed.done():  # the task ended without an answer: it raised
            await self._task
            raise RuntimeError("the server stopped while starting")
        return self._listed.result()

    async def aclose(self) -> None:
        """Stop the server (its process, or the HTTP session) and wait until it is gone."""
        task = self._task
        if task is not None and not task.done():
            self._closing.set()
            if self._session is None:
                # Starting, or waiting to start again: nothing to leave gracefully. One
                # cancellation; the SDK's bounded clean-up of a half-started server follows.
                task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_PATIENCE)
            await cancel_and_wait(task, ask_again=CLOSE_PATIENCE)
        if self._listed is not None and not self._listed.done():
            self._listed.cancel()

    @property
    def running(self) -> bool:
        """Whether a session is up and answering."""
        return self._ready.is_set()

    async def wait_running(self) -> None:
        """Return once a session is up (for tests and health checks)."""
        await self._ready.wait()

    async def wait_stopped(self) -> None:
        """Return once no session is up (the server died and is not back yet)."""
        await self._down.wait()

    def _set_running(self, running: bool) -> None:
        (self._ready if running else self._down).set()
        (self._down if running else self._ready).clear()

    async def call(self, tool: str, arguments: dict[str, Any], *, grace: float) -> str:
        """Call the server's `tool`; every failure is a `ToolError` the model can read."""
        if self._task is None or self._task.done():
            raise ToolError(f"MCP server {self.name!r} is not running.")
        session = await self._session_within(grace)
        try:
            return await self._call_once(session, tool, arguments)
        except _SessionRefused:
            # The server never ran the call: make it once more, on a new session.
            self._mark_broken(session, "it no longer knows the session")
        session = await self._session_within(grace)
        try:
            return await self._call_once(session, tool, arguments)
        except _SessionRefused as refused:
            self._mark_broken(session, "it no longer knows the session")
            raise ToolError(
                f"MCP server {self.name!r} refused {tool}: {refused}; it is being restarted."
            ) from refused

    async def _session_within(self, grace: float) -> ClientSession:
        """The running session, waiting up to `grace` (and the call timeout) for a restart."""
        if not self._ready.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(grace, self.settings.timeout)):
                    await self._ready.wait()
        session = self._session
        if session is None:
            raise ToolError(
                f"MCP server {self.name!r} is not running (it is being restarted); try again later."
            )
        return session

    async def _call_once(self, session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
        try:
            async with asyncio.timeout(self.settings.timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r} did not answer {tool} within "
                f"{self.settings.timeout:g} s."
            ) from None
        except MCPError as exc:
            if self._session_gone(exc):
                raise _SessionRefused(exc.message) from exc
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise ToolError(f"MCP server {self.name!r} refused {tool}: {exc}") from exc
            self._mark_broken(session, str(exc))
            raise ToolError(
                f"MCP server {self.name!r} stopped while running {tool}; it is being restarted."
            ) from exc
        except _TRANSPORT_ERRORS as exc:
            self._mark_broken(session, reason(exc))
            raise ToolError(
                f"MCP server {self.name!r} failed while running {tool} "
                f"({type(exc).__name__}); it is being restarted."
            ) from exc
        except Exception as exc:
            # The session still works (a result that breaks its own schema, say).
            raise ToolError(f"MCP server {self.name!r} failed on {tool}: {reason(exc)}") from exc
        return render_result(result)

    def _session_gone(self, exc: MCPError) -> bool:
        """Whether a streamable-HTTP server refused the request for its session."""
        if self.settings.url is None:
            return False
        # 404 is the spec's answer for a session the server does not know; servers that
        # answer 400 instead name the session in the message ("No valid session ID"), some
        # with the code the SDK also uses for a closed connection (-32000).
        return self._session_unknown or "session" in exc.message.lower()

    def _mark_broken(self, session: ClientSession, why: str) -> None:
        if self._session is session:
            self._lost(why)

    def _lost(self, why: str) -> None:
        """The running session is gone: say so once and let the serving task restart it."""
        if self._closing.is_set():
            return  # closing ends the session: nothing to say or restart
        if self._session is not None and not self._broken.is_set():
            log.warning("MCP server %r stopped answering (%s); restarting it", self.name, why)
            self._set_running(False)
            self._broken.set()

    async def _watch(
        self,
        incoming: AsyncIterable[SessionMessage | Exception],
        forward: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Pass the server's messages to the session; their end means the server is gone.

        Without this a server that dies between calls would be noticed only by the next call.
        """
        async with forward:
            async for item in incoming:
                await forward.send(item)
        self._lost("it closed the connection")

    async def _on_message(self, message: IncomingMessage) -> None:
        """The session's notifications: a changed tool list is listed again by the task."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_changed.set()

    async def _serve(self) -> None:
        assert self._listed is not None
        try:
            await self._session_once()
        except Exception as exc:
            if not self._listed.done():
                self._listed.set_exception(exc)
                return  # never started: the manager reports it and offers no tools
        while not self._closing.is_set():
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(Exception),
                wait=wait_exponential(multiplier=self._backoff, max=self._backoff_max),
                before_sleep=self._log_retry,
            ):
                with attempt:
                    if self._closing.is_set():
                        return
                    self.restarts += 1
                    await self._session_once()

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "MCP server %r could not be restarted (%s); trying again in %.1f s",
            self.name,
            reason(error),
            delay,
        )

    async def _session_once(self) -> None:
        """Open a session, list the tools, serve until broken; raises if it cannot open."""
        served = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(self.settings.startup_timeout):
                    session = await self._open(stack)
                    await session.initialize()
                    listed = await _list_tools(session)
                self._broken.clear()
                self._session_unknown = False
                self._tools_changed.clear()
                self._session = session
                self._set_running(True)
                served = True
                assert self._listed is not None
                if not self._listed.done():
                    self._listed.set_result(listed)
                else:
                    log.info("MCP server %r is running again", self.name)
                    self._on_listed(self.name, listed)
                try:
                    await self._serve_session(session)
                finally:
                    self._session = None
                    self._set_running(False)
        except Exception as exc:
            if not served:
                raise
            if self._broken.is_set() or self._closing.is_set():
                # A call saw it die (and said so), or it is being closed; leaving the session
                # raised as well.
                log.debug("MCP server %r closed with %s", self.name, reason(exc))
            else:
                # The transport failed by itself (the HTTP server went away, say).
                log.warning("MCP server %r stopped (%s); restarting it", self.name, reason(exc))

    async def _serve_session(self, session: ClientSession) -> None:
        """Wait until the session breaks or the connection closes; list tools when told to."""
        wanted = {
            self._broken: asyncio.create_task(self._broken.wait()),
            self._closing: asyncio.create_task(self._closing.wait()),
        }
        try:
            while not (self._broken.is_set() or self._closing.is_set()):
                changed = asyncio.create_task(self._tools_changed.wait())
                try:
                    await asyncio.wait(
                        {*wanted.values(), changed}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    changed.cancel()
                if self._tools_changed.is_set() and not self._broken.is_set():
                    self._tools_changed.clear()
                    await self._list_again(session)
        finally:
            for waiting in wanted.values():
                waiting.cancel()

    async def _list_again(self, session: ClientSession) -> None:
        """The server said its tools changed: list them and offer what it offers now."""
        try:
            async with asyncio.timeout(self.settings.timeout):
                listed = await _list_tools(session)
        except (TimeoutError, MCPError, *_TRANSPORT_ERRORS) as exc:
            log.warning("MCP server %r could not list its tools again (%s)", self.name, reason(exc))
            return
        log.info("MCP server %r changed its tools; offering %d", self.name, len(listed))
        self._on_listed(self.name, listed)

    async def _open(self, stack: contextlib.AsyncExitStack) -> ClientSession:
        settings = self.settings
        if settings.command is not None:
            params = StdioServerParameters(
                command=settings.command[0],
                args=settings.command[1:],
                env=settings.env or None,
                cwd=settings.cwd,
            )
            transport = (
                stdio_client(params)
                if self._errlog is None
                else stdio_client(params, errlog=self._errlog)
            )
            read, write = await stack.enter_async_context(transport)
        else:
            assert settings.url is not None
            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=settings.headers,
                    timeout=_HTTP_TIMEOUT,
                    event_hooks={"response": [self._note_response]},
                )
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(settings.url, http_client=client)
            )
        # The watcher runs in a task group entered here, cancelled before it is left.
        watchers = await stack.enter_async_context(anyio.create_task_group())
        forward, watched = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        stack.push_async_callback(watched.aclose)
        stack.callback(watchers.cancel_scope.cancel)
        watchers.start_soon(self._watch, read, forward)
        return await stack.enter_async_context(
            ClientSession(
                watched, write, message_handler=self._on_message, client_info=_client_info()
            )
        )

    async def _note_response(self, response: httpx2.Response) -> None:
        """Remember a 404 to a request that named a session: the server forgot it."""
        if response.status_code == 404 and _SESSION_HEADER in response.request.headers:
            self._session_unknown = True


class _SessionRefused(Exception):
    """The server refused a call for its session (it restarted); the call is made again."""


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def reason(exc: BaseException | None) -> str:
    """A one-line reason: the innermost error of an exception group, type and message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "unknown error"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "it closed the connection; did the command exit?"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
