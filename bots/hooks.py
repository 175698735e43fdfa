"""The hooks listener: HTTP ingress for external notifications and agent turns.

Off unless `SWITCHBOARD_HOOKS_PORT` is set; served by `switchboard serve` and by `switchboard
hooks` alone. Binds 127.0.0.1 unless `SWITCHBOARD_HOOKS_HOST` says otherwise, and wants
`Authorization: Bearer <SWITCHBOARD_HOOKS_TOKEN>` (24 characters at least; the scheme in any
case) on every request; an address that sends wrong tokens too often waits (`bots/bearer.py`).

- `POST /hooks/notify` `{"to": "telegram:123", "text": "...", "name": "ci"}`: the text is
  delivered as it is.
- `POST /hooks/agent` `{"to": "...", "prompt": "...", "policy": "always", "session": "ci"}`:
  a turn in the session `notify:<session>` under the target chat's mode (never `full`), its
  answer delivered per the policy (`always` or `conditional`).

Answers: 202 `{"id": ...}` once queued; 400 with one line saying what is wrong with the body;
401 bad token; 403 a target not in the profile's `[hooks] targets`; 413 a body over 64 KB;
429 with `Retry-After` over the per-token rate (`[hooks] rate`, default 60/minute) or after
too many wrong tokens from one address (10 a minute); 503 while the bus is away.
An `Idempotency-Key` header makes a repeat return the same id and deliver nothing more.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from aiohttp.typedefs import Handler
from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bots.bearer import BearerGuard
from core.addresses import AddressBook
from core.envelopes import Address, NotificationSource
from core.errors import BusError, ConfigError
from core.notifications.external import Notifier, check_reachable
from core.profile import HooksOptions

__all__ = ["MAX_BODY_BYTES", "MIN_TOKEN_LENGTH", "HooksServer", "HooksSettings"]

log = logging.getLogger(__name__)

MIN_TOKEN_LENGTH = 24
MAX_BODY_BYTES = 64 * 1024
_MAX_KEY_LENGTH = 200
_NAME = r"^[A-Za-z0-9_.-]{1,64}$"


@dataclass(frozen=True)
class HooksSettings:
    """Where the listener binds, its token, the chats it may reach and its rate."""

    port: int
    token: str
    targets: frozenset[Address]
    limits: tuple[RateLimitItem, ...]
    host: str = "127.0.0.1"

    @classmethod
    def build(
        cls,
        *,
        port: int,
        token: str | None,
        host: str,
        options: HooksOptions,
        addresses: AddressBook,
    ) -> HooksSettings:
        """Checked settings; `ConfigError` (one line) for a missing or short token, a target
        that is not an address, or a rate `limits` cannot read."""
        if token is None or len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(
                f"SWITCHBOARD_HOOKS_TOKEN must be set, at least {MIN_TOKEN_LENGTH} characters, "
                "when SWITCHBOARD_HOOKS_PORT is (e.g. `openssl rand -hex 24`)"
            )
        targets = set()
        for target in options.targets:
            try:
                address = addresses.parse(target)
                check_reachable(address)
            except ValueError as exc:
                raise ConfigError(f"[hooks] targets: {exc}") from None
            targets.add(address)
        try:
            rates = tuple(parse_many(options.rate))
        except ValueError:
            raise ConfigError(
                f"[hooks] rate: {options.rate!r} is not a rate; write e.g. '60/minute'"
            ) from None
        return cls(port=port, token=token, targets=frozenset(targets), limits=rates, host=host)


class _NotifyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=16_000)
    name: str = Field(default="notify", pattern=_NAME)


class _AgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=16_000)
    policy: Literal["always", "conditional"] = "always"
    session: str = Field(default="hook", pattern=_NAME)


class HooksServer:
    """Serves `/hooks/notify` and `/hooks/agent` until `close()`."""

    def __init__(
        self, settings: HooksSettings, *, notifier: Notifier, addresses: AddressBook
    ) -> None:
        self.settings = settings
        self.notifier = notifier
        self.addresses = addresses
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._bearer = BearerGuard(settings.token, name="hooks")
        # Rate-limit key of the token: its digest, so the token itself is kept nowhere else.
        self._token_key = hashlib.sha256(settings.token.encode()).hexdigest()[:16]
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        """The port it listens on, once started (the given one, or the one chosen for 0)."""

    async def start(self) -> None:
        """Listen; `OSError` if the port cannot be had."""
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY_BYTES)
        app.router.add_post("/hooks/notify", self._notify)
        app.router.add_post("/hooks/agent", self._agent)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.settings.host, self.settings.port).start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self.settings.port
        log.info("hooks listener on http://%s:%s", self.settings.host, self.port)

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The token first (constant time; wrong ones throttled per address), then the
        token's rate."""
        refusal = await self._bearer.check(request)
        if refusal is not None and refusal.status == 429:
            return _error(429, "too many wrong tokens; try again later", refusal.headers)
        if refusal is not None:
            return _error(401, "unauthorized: send Authorization: Bearer <SWITCHBOARD_HOOKS_TOKEN>")
        for limit in self.settings.limits:
            if not await self._limiter.hit(limit, "hooks", self._token_key):
                stats = await self._limiter.get_window_stats(limit, "hooks", self._token_key)
                wait = max(1, math.ceil(stats.reset_time - time.time()))
                return _error(
                    429, f"too many requests: the limit is {limit}", {"Retry-After": str(wait)}
                )
        try:
            return await handler(request)
        except web.HTTPClientError as exc:
            # aiohttp's own refusals (413 over the size limit, 405, 404), as one JSON line too.
            if isinstance(exc, web.HTTPRequestEntityTooLarge):
                return _error(413, f"the body is over {MAX_BODY_BYTES // 1024} KB")
            return _error(exc.status, exc.reason)
        except BusError as exc:
            log.warning("hooks: the bus refused a request: %s", exc)
            return _error(503, "the bus is unavailable; try again shortly")

    async def _notify(self, request: web.Request) -> web.Response:
        found = await self._read(request, _NotifyBody)
        if isinstance(found, web.Response):
            return found
        body, to, key = found
        assert isinstance(body, _NotifyBody)
        source = NotificationSource(kind="hook", name=body.name)
        ident = await self.notifier.notify(to, body.text, source=source, key=key)
        log.info("hooks: notification %s for %s accepted", ident, to)
        return web.json_response({"id": ident}, status=202)

    async def _agent(self, request: web.Request) -> web.Response:
        found = await self._read(request, _AgentBody)
        if isinstance(found, web.Response):
            return found
        body, to, key = found
        assert isinstance(body, _AgentBody)
        source = NotificationSource(kind="hook", name=body.session)
        ident = await self.notifier.ask(
            to, body.prompt, policy=body.policy, session=body.session, source=source, key=key
        )
        log.info("hooks: agent request %s for %s accepted", ident, to)
        return web.json_response({"id": ident}, status=202)

    async def _read(
        self, request: web.Request, model: type[_NotifyBody | _AgentBody]
    ) -> tuple[BaseModel, Address, str | None] | web.Response:
        """The body, its target and the idempotency key; or the 4xx answer saying why not."""
        key = request.headers.get("Idempotency-Key")
        if key is not None and not 0 < len(key) <= _MAX_KEY_LENGTH:
            return _error(400, f"Idempotency-Key: 1 to {_MAX_KEY_LENGTH} characters")
        raw = await request.read()  # over the size limit: aiohttp answers 413
        try:
            data: Any = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "the body is not JSON")
        try:
            body = model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            return _error(400, f"{where}: {first['msg']}")
        try:
            to = self.addresses.parse(body.to)
        except ValueError as exc:
            return _error(400, f"to: {exc}")
        if to not in self.settings.targets:
            return _error(403, f"to: {body.to} is not among the [hooks] targets of the profile")
        return body, to, key


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)
