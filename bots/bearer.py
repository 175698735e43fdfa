"""The bearer-token check of the hooks listener and the operations endpoints.

`Authorization: Bearer <token>`, the scheme read in any case (RFC 7235: `bearer` and `BEARER`
are `Bearer`), the token compared in constant time. Wrong tokens are counted per client
address (`core.throttle.TokenThrottle`, as the web page counts its own): past the limit, that
address gets 429 with `Retry-After` for every request, right token or not, until the window
lets it try again, so nobody can guess the token at network speed. The address is the TCP
peer's (`X-Forwarded-For` is not trusted): behind a reverse proxy, every client shares the
proxy's.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

from aiohttp import web

from core.throttle import WRONG_TOKENS, TokenThrottle

__all__ = ["BearerGuard", "Refusal", "bearer_token"]

log = logging.getLogger(__name__)


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

    def __init__(self, token: str, *, name: str, failed_attempts: str = WRONG_TOKENS) -> None:
        """`name` tells the listeners apart in the log."""
        self._token = token.encode()
        self._name = name
        self._throttle = TokenThrottle(failed_attempts, namespace=name)

    async def check(self, request: web.Request) -> Refusal | None:
        """None when `request` holds the token; else why it is refused."""
        client = request.remote or "unknown"
        wait = await self._throttle.wait(client)
        if wait is not None:
            return self._throttled(client, wait)
        given = bearer_token(request.headers.get("Authorization", ""))
        if given is not None and hmac.compare_digest(given.encode(), self._token):
            return None
        if not await self._throttle.wrong(client):
            # Another request took the last place meanwhile.
            return self._throttled(client, await self._throttle.wait(client) or 1)
        return Refusal(401)

    def _throttled(self, client: str, wait: int) -> Refusal:
        log.warning("%s: too many wrong tokens from %s; refused for %ss", self._name, client, wait)
        return Refusal(429, retry_after=wait)
