"""The operations endpoints of a long-running process: `/metrics`, `/healthz` and `/readyz`.

Off unless `SWITCHBOARD_METRICS_PORT` is set. Like every listener of Switchboard it binds to
127.0.0.1 unless told otherwise and wants a token: `Authorization: Bearer
<SWITCHBOARD_METRICS_TOKEN>` on every request (Prometheus' `authorization` setting, a
container health check's header; the scheme in any case). An address that sends wrong tokens
too often gets 429 with `Retry-After` for a while (`bots/bearer.py`). `/healthz` says the
process is alive; `/readyz` answers 503 while a loop is down or a dependency (store, bus) does
not answer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler

from bots.bearer import BearerGuard
from bots.platforms import REGISTERED
from bots.settings import Settings
from channels.web.spec import SPEC as WEB
from core.bus.names import RECEIPTS, outbound_queue
from core.errors import ConfigError
from core.metrics import CONTENT_TYPE, Metrics
from core.readiness import Readiness

__all__ = [
    "MIN_TOKEN_LENGTH",
    "OperationsServer",
    "OperationsSettings",
    "operations_settings",
    "watched_queues",
]

log = logging.getLogger(__name__)

MIN_TOKEN_LENGTH = 24


def watched_queues() -> list[str]:
    """The work queues whose sizes a scrape reports: `receipts`, and the outbound queue of each
    platform a gateway serves and of the web page (inbound work waits in the sessions'
    mailboxes: `switchboard_mailbox_waiting`)."""
    platforms = (*REGISTERED.served(), WEB.name)
    return [RECEIPTS, *(outbound_queue(name) for name in platforms)]


@dataclass(frozen=True)
class OperationsSettings:
    """Where the endpoints listen and the token they want."""

    port: int
    token: str
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_LENGTH:
            raise ConfigError(
                f"SWITCHBOARD_METRICS_TOKEN must be set, at least {MIN_TOKEN_LENGTH} characters, "
                "when SWITCHBOARD_METRICS_PORT is (e.g. `openssl rand -hex 24`)"
            )


def operations_settings(settings: Settings) -> OperationsSettings | None:
    """The endpoints' checked settings, None when SWITCHBOARD_METRICS_PORT is unset;
    `ConfigError` for a missing or short token (what `serve` refuses, `doctor` reports)."""
    if settings.metrics_port is None:
        return None
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    return OperationsSettings(port=settings.metrics_port, token=token, host=settings.metrics_host)


class OperationsServer:
    """Serves the endpoints until `close()`."""

    def __init__(
        self, settings: OperationsSettings, *, metrics: Metrics, readiness: Readiness
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.readiness = readiness
        self._bearer = BearerGuard(settings.token, name="operations")
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        """The port it listens on, once started (the given one, or the one chosen for 0)."""

    async def start(self) -> None:
        """Listen; `OSError` if the port cannot be had."""
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._alive)
        app.router.add_get("/readyz", self._ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.settings.host, self.settings.port).start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self.settings.port
        log.info("operations endpoints on http://%s:%s", self.settings.host, self.port)

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = await self._bearer.check(request)
        if refusal is None:
            return await handler(request)
        text = "too many wrong tokens" if refusal.status == 429 else "unauthorized"
        return web.Response(status=refusal.status, text=text, headers=refusal.headers)

    async def _metrics(self, _request: web.Request) -> web.Response:
        await self.metrics.refresh()
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _alive(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _ready(self, _request: web.Request) -> web.Response:
        report = await self.readiness.report()
        body = json.dumps({"ready": report.ready, "checks": report.details})
        return web.Response(
            status=200 if report.ready else 503, text=body, content_type="application/json"
        )
