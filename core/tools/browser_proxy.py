"""`CheckedProxy`: the forward proxy every connection of one browser context goes through.

Chromium is told to send everything through it (plain HTTP requests, `CONNECT` tunnels for
HTTPS and secure websockets, loopback included), so every hop is checked here: a redirect the
browser follows, an image, a script's fetch. The proxy resolves the host once, refuses it
unless every address is public (`check`, `web_fetch`'s rule), and connects to the very
address it checked, so a DNS answer that changes after the check (rebinding) is never used.
A refused connection is answered `403` with the reason, which is kept in `refused` for the
tool to tell the model. Playwright's request routing cannot do this: it does not see the hops
of a redirect the browser follows itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from yarl import URL

from core.errors import ToolError

__all__ = ["Check", "CheckedProxy"]

# The address to connect to for a URL's host, or `ToolError` with why not.
Check = Callable[[URL], Awaitable[str]]

_HEAD_LIMIT = 64 * 1024
_CHUNK = 64 * 1024
# Headers meant for the proxy, or about the client's connection to it.
_HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive"})


class CheckedProxy:
    """A loopback HTTP proxy that connects only where `check` allows; `start` gives its URL."""

    def __init__(self, check: Check, *, timeout: float) -> None:
        self._check = check
        self._timeout = timeout
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        # Why each refused connection was refused, by what it asked for (the URL of a plain
        # HTTP request, `https://host[:port]` of a tunnel); the tool clears it before each action.
        self.refused: dict[str, str] = {}

    async def start(self) -> str:
        """Listen on a free port of 127.0.0.1; the proxy's URL for the browser."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_HEAD_LIMIT)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        """Stop listening and end every connection in flight."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._handlers):
            task.cancel()
        for task in list(self._handlers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _serve(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            await self._relay(client, to_client)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that went away or spoke nonsense: its connection just ends
        finally:
            to_client.close()
            if task is not None:
                self._handlers.discard(task)

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        head = (await client.readuntil(b"\r\n\r\n")).decode("latin-1")
        line, *headers = head.rstrip("\r\n").split("\r\n")
        method, target, version = line.split(" ", 2)
        tunnel = method.upper() == "CONNECT"
        url = _url_of(target, tunnel)
        try:
            address = await self._check(url)
        except ToolError as exc:
            self.refused[str(url) if tunnel else target] = str(exc)
            body = str(exc).encode()
            to_client.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await to_client.drain()
            return
        async with asyncio.timeout(self._timeout):
            server, to_server = await asyncio.open_connection(address, url.port)
        try:
            if tunnel:
                to_client.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                kept = [h for h in headers if h.split(":", 1)[0].lower() not in _HOP_HEADERS]
                request = [f"{method} {url.raw_path_qs} {version}", *kept, "Connection: close"]
                to_server.write(("\r\n".join(request) + "\r\n\r\n").encode("latin-1"))
            await _both_ways(client, to_client, server, to_server)
        finally:
            to_server.close()


def _url_of(target: str, tunnel: bool) -> URL:
    """The URL a request line asks for (`host:port` for a tunnel); ValueError if none."""
    if tunnel:
        host, _, port = target.rpartition(":")
        return URL.build(scheme="https", host=host.strip("[]"), port=int(port))
    url = URL(target)
    if url.scheme != "http" or not url.raw_host:
        raise ValueError(f"not a proxy request: {target!r}")
    return url


async def _both_ways(
    client: asyncio.StreamReader,
    to_client: asyncio.StreamWriter,
    server: asyncio.StreamReader,
    to_server: asyncio.StreamWriter,
) -> None:
    """Copy bytes each way until either side is done."""
    copies = [
        asyncio.create_task(_copy(client, to_server)),
        asyncio.create_task(_copy(server, to_client)),
    ]
    try:
        await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for copy in copies:
            copy.cancel()
        for copy in copies:
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await copy


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(_CHUNK):
        writer.write(chunk)
        await writer.drain()
