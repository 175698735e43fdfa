"""MCP servers of a worker process: started once, restarted when they die, called as tools.

`McpServers` is what `bots/` owns: `start()` launches every declared server (concurrently),
lists its tools and turns them into `McpTool`s; a server that cannot start is one WARNING
line and offers no tools, and the rest of the bot runs. `aclose()` stops them all.

Each server lives in one task that owns the SDK's transport and `ClientSession` context
managers (anyio requires them to be entered and left in the same task). The end of the
server's messages, or a call that finds the connection closed, marks it broken; the task
then leaves the session and starts a new one (tenacity's exponential backoff between failed
attempts), and calls wait a little for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Mapping
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from core.errors import ToolError
from core.mcp.settings import McpServerSettings
from core.mcp.tools import McpTool, render_result, tool_name
from core.tasks import cancel_and_wait
from core.tools.base import Tool

__all__ = ["McpServers"]

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


class _Broken(Exception):
    """The session stopped working; the serving task starts a new one."""


class _Connection:
    """One MCP server: a task owning its session, restarting it when it breaks."""

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        *,
        backoff: float,
        backoff_max: float,
        errlog: TextIO | None,
    ) -> None:
        self.name = name
        self.settings = settings
        self._errlog = errlog
        self.restarts = 0
        self._backoff = backoff
        self._backoff_max = backoff_max
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._down = asyncio.Event()
        self._down.set()
        self._broken = asyncio.Event()
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
        """Stop the server (its process, or the HTTP session)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
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
        if not self._ready.is_set():
            # Restarting: give it a moment rather than failing at once.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(grace, self.settings.timeout)):
                    await self._ready.wait()
        session = self._session
        if session is None:
            raise ToolError(
                f"MCP server {self.name!r} is not running (it is being restarted); try again later."
            )
        try:
            async with asyncio.timeout(self.settings.timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r} did not answer {tool} within "
                f"{self.settings.timeout:g} s."
            ) from None
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise ToolError(f"MCP server {self.name!r} refused {tool}: {exc}") from exc
            self._mark_broken(session, str(exc))
            raise ToolError(
                f"MCP server {self.name!r} stopped while running {tool}; it is being restarted."
            ) from exc
        except _TRANSPORT_ERRORS as exc:
            self._mark_broken(session, _reason(exc))
            raise ToolError(
                f"MCP server {self.name!r} failed while running {tool} "
                f"({type(exc).__name__}); it is being restarted."
            ) from exc
        except Exception as exc:
            # The session still works (a result that breaks its own schema, say).
            raise ToolError(f"MCP server {self.name!r} failed on {tool}: {_reason(exc)}") from exc
        return render_result(result)

    def _mark_broken(self, session: ClientSession, why: str) -> None:
        if self._session is session:
            self._lost(why)

    def _lost(self, why: str) -> None:
        """The running session is gone: say so once and let the serving task restart it."""
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

    async def _serve(self) -> None:
        assert self._listed is not None
        try:
            await self._session_once()
        except Exception as exc:
            if not self._listed.done():
                self._listed.set_exception(exc)
                return  # never started: the manager reports it and offers no tools
        while True:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(Exception),
                wait=wait_exponential(multiplier=self._backoff, max=self._backoff_max),
                before_sleep=self._log_retry,
            ):
                with attempt:
                    self.restarts += 1
                    await self._session_once()

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "MCP server %r could not be restarted (%s); trying again in %.1f s",
            self.name,
            _reason(error),
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
                self._session = session
                self._set_running(True)
                served = True
                assert self._listed is not None
                if not self._listed.done():
                    self._listed.set_result(listed)
                else:
                    log.info("MCP server %r is running again", self.name)
                try:
                    await self._broken.wait()
                finally:
                    self._session = None
                    self._set_running(False)
        except Exception as exc:
            if not served:
                raise
            if self._broken.is_set():
                # A call saw it die (and said so); leaving the dead session raised as well.
                log.debug("MCP server %r closed with %s", self.name, _reason(exc))
            else:
                # The transport failed by itself (the HTTP server went away, say).
                log.warning("MCP server %r stopped (%s); restarting it", self.name, _reason(exc))

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
                httpx2.AsyncClient(headers=settings.headers, timeout=_HTTP_TIMEOUT)
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
        return await stack.enter_async_context(ClientSession(watched, write))


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


def _reason(exc: BaseException | None) -> str:
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


class McpServers:
    """The MCP servers a profile declares, as tools; owned by the worker process.

    `grace` is how long a call waits for a restarting server before it answers with an
    error; `backoff` and `backoff_max` shape the waits between failed restarts. `errlog` is
    where stdio servers write their stderr (a file with a descriptor; default: this
    process's stderr), e.g. a log file in the data folder for the terminal chat.
    """

    def __init__(
        self,
        settings: Mapping[str, McpServerSettings],
        *,
        grace: float = 5.0,
        backoff: float = 0.5,
        backoff_max: float = 30.0,
        errlog: TextIO | None = None,
    ) -> None:
        self._grace = grace
        self._connections = {
            name: _Connection(name, server, backoff=backoff, backoff_max=backoff_max, errlog=errlog)
            for name, server in settings.items()
        }
        self._tools: list[McpTool] = []

    async def start(self) -> None:
        """Start every server at once; one that fails is a WARNING line and offers nothing."""
        names = list(self._connections)
        outcomes = await asyncio.gather(*(self._start_one(self._connections[n]) for n in names))
        taken: set[str] = set()
        for connection, listed in zip(self._connections.values(), outcomes, strict=True):
            for remote in listed:
                if not connection.settings.offers(remote.name):
                    continue
                tool = self._tool(connection, remote, taken)
                taken.add(tool.name)
                self._tools.append(tool)

    async def _start_one(self, connection: _Connection) -> list[mcp_types.Tool]:
        try:
            return await connection.start()
        except Exception as exc:
            log.warning(
                "MCP server %r did not start (%s); its tools are not offered",
                connection.name,
                _reason(exc),
            )
            await connection.aclose()
            return []

    def _tool(self, connection: _Connection, remote: mcp_types.Tool, taken: set[str]) -> McpTool:
        grace = self._grace

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            return await connection.call(tool, arguments, grace=grace)

        description = (remote.description or remote.title or remote.name).strip()
        return McpTool(
            name=tool_name(connection.name, remote.name, taken),
            server=connection.name,
            remote_name=remote.name,
            description=f"[{connection.name}] {description}",
            schema=remote.input_schema,
            tier=connection.settings.tier_for(remote.name),
            call=call,
        )

    def tools(self) -> list[Tool[Any]]:
        """The tools of every server that started, for the `ToolRegistry`."""
        return list(self._tools)

    def mode_tools(self) -> dict[str, frozenset[str]]:
        """Mode name to the tool names its `modes` setting admits, for `ModeCatalog(admit=)`."""
        admitted: dict[str, set[str]] = {}
        for tool in self._tools:
            for mode in self._connections[tool.server].settings.modes:
                admitted.setdefault(mode, set()).add(tool.name)
        return {mode: frozenset(names) for mode, names in admitted.items()}

    def running(self, server: str) -> bool:
        """Whether `server` has a session up."""
        return self._connections[server].running

    async def wait_running(self, server: str) -> None:
        """Return once `server` has a session up (after a restart, say)."""
        await self._connections[server].wait_running()

    async def wait_stopped(self, server: str) -> None:
        """Return once `server` has no session up (it died and is not back yet)."""
        await self._connections[server].wait_stopped()

    async def aclose(self) -> None:
        """Stop every server."""
        for connection in self._connections.values():
            await connection.aclose()

    async def __aenter__(self) -> McpServers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
