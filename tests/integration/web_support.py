"""A running web page for tests: server, web gateway and worker in the test's event loop.

The page's parts are the product's (`WebServer`, `WebAdapter`, `Gateway`, a worker assembled
like `bots/app.py` does, a `MemoryBus`, the test's SQLite store); only the model is the
test's. Requests reach it over a real socket.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bots.platforms import REGISTERED
from channels.gateway import Gateway
from channels.web import WebAdapter, WebAuth, WebServer
from channels.web.api import ReadApi
from core.backends.sql.store import SqlStore
from core.bus.names import EVENTS, NOTIFICATIONS
from core.confirm import Confirmations
from core.heartbeat import SqliteHeartbeats
from core.policy import ChannelPolicy
from core.providers.base import Provider
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.scheduling.book import ScheduleBook
from core.throttle import TokenThrottle
from core.tools import ToolRegistry, builtin_tools
from core.tools.ask_user import ask_user_tool
from core.tools.base import Tool
from tests.backends.memory_bus import MemoryBus
from tests.workers import build_worker

__all__ = ["PATIENCE", "TOKEN", "Page", "parse_sse", "running_page"]

TOKEN = "web-token-0123456789abcdef"
PATIENCE = 10.0


@dataclass
class Page:
    """A running web page and an HTTP client for it."""

    server: WebServer
    http: aiohttp.ClientSession
    store: SqlStore
    bus: MemoryBus
    # The heartbeat board the page's Platforms view reads (a test beats on it).
    board: SqliteHeartbeats

    @property
    def base(self) -> str:
        return self.server.url.rstrip("/")

    @property
    def origin(self) -> str:
        return self.base

    def bearer(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}", **extra}

    async def chat(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """POST /api/chat and read its event stream to the end."""
        async with self.http.post(
            f"{self.base}/api/chat", json=body, headers=self.bearer()
        ) as response:
            assert response.status == 200, await response.text()
            assert response.headers["Content-Type"].startswith("text/event-stream")
            return parse_sse(await response.text())


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent event stream."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        if name and data:
            events.append((name, json.loads(data)))
    return events


@asynccontextmanager
async def running_page(
    store: SqlStore,
    provider: Provider,
    *,
    extra_tools: tuple[Tool[Any], ...] = (),
    throttle: TokenThrottle | None = None,
    ask_user: bool = False,
) -> AsyncIterator[Page]:
    """The page over `store` answering with `provider`, priced at $1 per million tokens
    (`throttle`: the server's bound on wrong tokens, its default when None), its heartbeat
    board a SQLite file of its own; `ask_user`: the `ask_user` tool is offered too."""
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        board = await SqliteHeartbeats.open(folder / "heartbeats.db")
        stack.push_async_callback(board.aclose)
        async with _running_page(
            store, provider, board, extra_tools, throttle, ask_user=ask_user
        ) as page:
            yield page


@asynccontextmanager
async def _running_page(
    store: SqlStore,
    provider: Provider,
    board: SqliteHeartbeats,
    extra_tools: tuple[Tool[Any], ...],
    throttle: TokenThrottle | None,
    *,
    ask_user: bool,
) -> AsyncIterator[Page]:
    bus = MemoryBus()
    gate = Confirmations(bus=bus, timeout=PATIENCE)
    asking = [ask_user_tool(gate, timeout=PATIENCE)] if ask_user else []
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([*builtin_tools(), *extra_tools, *asking]),
        store=store,
        cost=lambda model, usage: usage.total_tokens / 1_000_000,
        confirm=gate.confirm,
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=ChannelPolicy(
            modes=REGISTERED.default_modes(), admins=frozenset(REGISTERED.default_admins())
        ),
        stream_interval=0.0,
        confirmations=gate,
    )
    adapter = WebAdapter(commands=frozenset({"new", "help"}))
    server = WebServer(
        host="127.0.0.1",
        port=0,
        auth=WebAuth(TOKEN),
        adapter=adapter,
        bus=bus,
        topics=(EVENTS, NOTIFICATIONS),
        api=ReadApi(store=store, book=ScheduleBook(store), addresses=REGISTERED.addresses()),
        board=board,
        throttle=throttle,
    )
    await server.start()
    gateway = Gateway(adapter, bus, mailboxes=worker.mailboxes, readiness=Readiness())
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(gateway.run())]
    # unsafe: keep cookies of an IP address (the page is on 127.0.0.1).
    http = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=PATIENCE), cookie_jar=aiohttp.CookieJar(unsafe=True)
    )
    try:
        yield Page(server, http, store, bus, board)
    finally:
        await http.close()
        await server.close()
        await gateway.stop()
        await worker.stop(grace=PATIENCE)
        await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
        await bus.close()
