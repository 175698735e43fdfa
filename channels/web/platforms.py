"""`GET /api/platforms`: what `switchboard status` shows of each process and the platforms it
serves, read from the deployment's heartbeat board (`core/heartbeat.py`).

Each platform's figures are the watchdog's (`core/watchdog.py`) as of its process's last beat:
seconds since the last update and delivery, the poll lag, the failed share of the last
deliveries, and the open incident's sentence.
"""

from __future__ import annotations

from aiohttp import web

from core.clock import utc_now
from core.errors import StoreError
from core.heartbeat import HeartbeatBoard, process_document

__all__ = ["PlatformsApi"]


class PlatformsApi:
    """The page's view of the heartbeat board."""

    def __init__(self, board: HeartbeatBoard) -> None:
        self.board = board

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """Register the route on `router`."""
        router.add_get("/api/platforms", self.platforms)

    async def platforms(self, _request: web.Request) -> web.Response:
        """`{"processes": [...]}`, as `switchboard status --json` lists them."""
        now = utc_now()
        try:
            processes = await self.board.processes(now)
        except Exception as exc:  # redis-py's and sqlite3's errors: the server answers 503
            raise StoreError(f"cannot read the heartbeats: {exc}") from exc
        return web.json_response(
            {"now": now.isoformat(), "processes": [process_document(p, now) for p in processes]}
        )
