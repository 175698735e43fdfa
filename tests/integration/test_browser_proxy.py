"""`CheckedProxy` over real sockets: tunnels (`CONNECT`, how chromium reaches HTTPS) and plain
HTTP requests reach a checked address only; a refused one is a 403 with the reason."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial

import pytest
from aiohttp import web

from core.tools.browser_proxy import CheckedProxy
from core.tools.web_fetch import public_address, system_resolve
from tests.fakes.local_server import LocalServer

PATIENCE = 10.0


class Echo(LocalServer):
    """Answers with the request's path and `Connection` header."""

    def app(self) -> web.Application:
        app = web.Application()

        async def echo(request: web.Request) -> web.Response:
            return web.Response(text=f"{request.path_qs} {request.headers.get('Connection')}")

        app.router.add_get("/{tail:.*}", echo)
        return app


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[CheckedProxy, int]]:
    check = partial(public_address, resolve=system_resolve, allow_loopback=True, who="browser")
    made = CheckedProxy(check, timeout=PATIENCE)
    url = await made.start()
    try:
        yield made, int(url.rsplit(":", 1)[1])
    finally:
        await made.close()


async def _exchange(port: int, *lines: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for line in lines:
            writer.write(line)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), PATIENCE)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_plain_request_goes_to_the_checked_host_in_origin_form(
    proxy: tuple[CheckedProxy, int],
) -> None:
    async with Echo() as site:
        answer = await _exchange(
            proxy[1],
            f"GET {site.origin}/a?b=1 HTTP/1.1\r\nHost: {site.origin[7:]}\r\n".encode(),
            b"Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n",
        )
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert answer.endswith(b"/a?b=1 close")


async def test_a_tunnel_reaches_the_checked_host(proxy: tuple[CheckedProxy, int]) -> None:
    async with Echo() as site:
        hostport = site.origin[7:]
        answer = await _exchange(
            proxy[1],
            f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n\r\n".encode(),
            f"GET /t HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n".encode(),
        )
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK")
    assert answer.endswith(b"/t close")


@pytest.mark.parametrize(
    ("request_line", "asked"),
    [
        (b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n", "https://10.0.0.1"),
        (b"GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n", "http://169.254.169.254/latest/"),
    ],
)
async def test_a_private_or_metadata_address_is_refused_with_the_reason(
    proxy: tuple[CheckedProxy, int], request_line: bytes, asked: str
) -> None:
    answer = await _exchange(proxy[1], request_line)
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"Refused: " in answer
    assert asked in proxy[0].refused
