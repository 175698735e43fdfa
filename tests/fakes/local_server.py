"""`LocalServer`: what a protocol fake served by aiohttp shares: its app on a free port of
127.0.0.1, the base URL, the close, and `async with`. A fake builds its routes in `app()`."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from aiohttp import web

__all__ = ["LocalServer"]


class LocalServer:
    """An aiohttp application on 127.0.0.1, started by `start` (or `async with`)."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    def app(self) -> web.Application:
        """The fake's routes."""
        raise NotImplementedError

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:<port>`."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start serving."""
        self._runner = web.AppRunner(
            self.app(), handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop serving."""
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
