"""Server-sent events over an aiohttp response: one JSON object per event."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

__all__ = ["EventStream"]


class EventStream:
    """An open `text/event-stream` response."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response

    @classmethod
    async def open(cls, request: web.Request) -> EventStream:
        """Start the stream (headers go out now)."""
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        return cls(response)

    async def send(self, event: str, data: dict[str, Any]) -> None:
        """One event; `ConnectionResetError` once the client has gone."""
        payload = json.dumps(data, ensure_ascii=False, default=str)
        await self.response.write(f"event: {event}\ndata: {payload}\n\n".encode())

    async def keep_alive(self) -> None:
        """A comment line, so proxies and the browser keep the stream open."""
        await self.response.write(b": keep-alive\n\n")
