"""MCP servers of a worker process: started once, restarted when they die, called as tools.

`McpServers` is what `bots/` owns: `start()` launches every declared server (concurrently),
lists its tools and turns them into `McpTool`s; a server that cannot start is one WARNING
line and offers no tools, and the rest of the bot runs. `aclose()` stops them all at once.

Each server is a `Connection` (`core.mcp.connection`). When a server says its tools changed
(`notifications/tools/list_changed`), or comes back after a restart, its tools are listed
again and the registries (and modes) given to `keep_current` offer what it offers now.
Tools that run only as MCP tasks (`execution.taskSupport == "required"`) are not offered:
this client does not run tasks, so every call would fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, TextIO

import mcp_types

from core.mcp.connection import Connection, reason
from core.mcp.settings import McpServerSettings
from core.mcp.tools import McpTool, tool_name
from core.modes import ModeCatalog
from core.tools.base import Tool, ToolRegistry

__all__ = ["McpServers"]

log = logging.getLogger(__name__)


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
            name: Connection(
                name,
                server,
                backoff=backoff,
                backoff_max=backoff_max,
                errlog=errlog,
                on_listed=self._offer,
            )
            for name, server in settings.items()
        }
        # Server name to its offered tools, by the server's own tool name.
        self._offered: dict[str, dict[str, McpTool]] = {}
        self._registries: list[ToolRegistry] = []
        self._catalogs: list[ModeCatalog] = []
        # Set (and replaced) whenever the offered tools change.
        self._changed = asyncio.Event()
        # (server, tool) pairs already reported as not offered, so each is said once.
        self._skipped: set[tuple[str, str]] = set()

    async def start(self) -> None:
        """Start every server at once; one that fails is a WARNING line and offers nothing."""
        names = list(self._connections)
        try:
            outcomes = await asyncio.gather(*(self._start_one(self._connections[n]) for n in names))
        except asyncio.CancelledError:
            # Stopped while starting (SIGTERM, say): stop what did start before giving up.
            await self.aclose()
            raise
        for name, listed in zip(names, outcomes, strict=True):
            self._offer(name, listed)

    async def _start_one(self, connection: Connection) -> list[mcp_types.Tool]:
        try:
            return await connection.start()
        except Exception as exc:
            log.warning(
                "MCP server %r did not start (%s); its tools are not offered",
                connection.name,
                reason(exc),
            )
            await connection.aclose()
            return []

    def _offer(self, server: str, listed: list[mcp_types.Tool]) -> None:
        """Offer `server`'s tools as `listed` now, in every registry kept current."""
        connection = self._connections[server]
        before = self._offered.get(server, {})
        taken = {
            t.name for s, tools in self._offered.items() if s != server for t in tools.values()
        }
        now: dict[str, McpTool] = {}
        for remote in listed:
            if not connection.settings.offers(remote.name) or not self._runnable(server, remote):
                continue
            kept = before.get(remote.name)
            name = kept.name if kept is not None else tool_name(server, remote.name, taken)
            taken.add(name)
            now[remote.name] = self._tool(connection, remote, name)
        self._offered[server] = now
        for registry in self._registries:
            for tool in before.values():
                registry.remove(tool.name)
            for tool in now.values():
                registry.add(tool)
        for catalog in self._catalogs:
            for mode in connection.settings.modes:
                catalog.admit(mode, (tool.name for tool in now.values()))
        self._changed.set()
        self._changed = asyncio.Event()

    def _runnable(self, server: str, remote: mcp_types.Tool) -> bool:
        """Whether this client can call `remote` (not a tool that runs only as an MCP task)."""
        if remote.execution is None or remote.execution.task_support != "required":
            return True
        if (server, remote.name) not in self._skipped:
            self._skipped.add((server, remote.name))
            log.info(
                "MCP server %r: tool %r runs only as one of the MCP tasks, which Switchboard "
                "does not run; not offered",
                server,
                remote.name,
            )
        return False

    def _tool(self, connection: Connection, remote: mcp_types.Tool, name: str) -> McpTool:
        grace = self._grace

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            return await connection.call(tool, arguments, grace=grace)

        description = (remote.description or remote.title or remote.name).strip()
        return McpTool(
            name=name,
            server=connection.name,
            remote_name=remote.name,
            description=f"[{connection.name}] {description}",
            schema=remote.input_schema,
            tier=connection.settings.tier_for(remote.name),
            call=call,
        )

    def tools(self) -> list[Tool[Any]]:
        """The tools the servers offer now, for the `ToolRegistry`."""
        return [tool for tools in self._offered.values() for tool in tools.values()]

    def keep_current(self, registry: ToolRegistry, modes: ModeCatalog | None = None) -> None:
        """From now on, keep `registry` (built with `tools()`) offering what the servers offer,
        and the modes of `modes` each server names admitting its tools.

        An unknown mode name in a server's `modes` is a `ConfigError` here, at start.
        """
        if modes is not None:
            for connection in self._connections.values():
                for mode in connection.settings.modes:
                    modes.get(mode)
            self._catalogs.append(modes)
        self._registries.append(registry)

    async def wait_offered(self, name: str) -> None:
        """Return once a tool called `name` is offered (after a server changed its tools)."""
        while name not in {t.name for t in self.tools()}:
            await self._changed.wait()

    def mode_tools(self) -> dict[str, frozenset[str]]:
        """Mode name to the tool names its `modes` setting admits, for `ModeCatalog(admit=)`."""
        admitted: dict[str, set[str]] = {}
        for server, tools in self._offered.items():
            for mode in self._connections[server].settings.modes:
                admitted.setdefault(mode, set()).update(t.name for t in tools.values())
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
        """Stop every server, together, and return once each is gone."""
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))

    async def __aenter__(self) -> McpServers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
