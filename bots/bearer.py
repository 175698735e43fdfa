"""The bearer-token check of the hooks listener and the operations endpoints.

`Authorization: Bearer <token>`, the scheme read in any case (RFC 7235: `bearer` and `BEARER`
are `Bearer`), the token compared in constant time. Wrong tokens are counted per client
address (the `limits` package, a moving window in memory): past `FAILED_ATTEMPTS`, that
address gets 429 with `Retry-After` for every request, right token or not, until the window
lets it try again, so nobody can guess the token at network speed. The address is the TCP
peer's (`X-Forwarded-For` is not trusted): behind a reverse proxy, every client shares the
proxy's.
"""

from __future__ import annotations

import hmac
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from limits import parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

__all__ = ["FAILED_ATTEMPTS", "BearerGuard", "Refusal", "bearer_token"]

log = logging.getLogger(__name__)

# Wrong tokens one client address may send before it has to wait.
FAILED_ATTEMPTS: Final = "10/minute"


def bearer_token(header: str) -> str | None:
    """The token of an `Authorization` header value of the Bearer scheme (in any case), or
    None for another scheme or none."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was refused: 401 (no or a wrong token) or 429 (too many wrong tokens
    from its address; `retry_after` seconds to wait)."""

    status: int
    retry_after: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The response headers the refusal needs (`Retry-After` for a 429)."""
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


class BearerGuard:
    """Checks requests for one token; throttles the addresses that send wrong ones."""

    def __init__(
        self,
        token: str,
        *,
        name: str,
        failed_attempts: str = FAILED_ATTEMPTS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`name` tells the listeners apart in the log; `clock` is what `Retry-After` is
        counted from (epoch seconds, as the `limits` storage keeps its windows)."""
        self._token = token.encode()
        self._name = name
        self._failures = parse(failed_attempts)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._clock = clock

    async def check(self, request: web.Request) -> Refusal | None:
        """None when `request` holds the token; else why it is refused."""
        client = request.remote or "unknown"
        if not await self._limiter.test(self._failures, self._name, client):
            return await self._throttled(client)
        given = bearer_token(request.headers.get("Authorization", ""))
        if given is not None and hmac.compare_digest(given.encode(), self._token):
            return None
        if not await self._limiter.hit(self._failures, self._name, client):
            return await self._throttled(client)  # another request took the last place
        return Refusal(401)

    async def _throttled(self, client: str) -> Refusal:
        stats = await self._limiter.get_window_stats(self._failures, self._name, client)
        wait = max(1, math.ceil(stats.reset_time - self._clock()))
        log.warning("%s: too many wrong tokens from %s; refused for %ss", self._name, client, wait)
        return Refusal(429, retry_after=wait)
