"""Who may use the web page: the holder of its token.

A browser signs in once (`POST /login` with the token) and gets an HttpOnly, SameSite=Strict
cookie holding a value derived from the token (never the token itself); API clients send
`Authorization: Bearer <token>`. Every comparison is constant-time. A write (any method but
GET/HEAD) must come from the page's own origin: a browser always says where a write comes
from, so a cookie-carrying write without an `Origin` is refused too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Literal

from aiohttp import web

__all__ = ["COOKIE", "Credential", "WebAuth", "new_token"]

COOKIE = "switchboard_web"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Credential = Literal["bearer", "cookie"]


def new_token() -> str:
    """A fresh random token (192 bits)."""
    return secrets.token_urlsafe(24)


class WebAuth:
    """The page's token and the checks made on every request."""

    def __init__(self, token: str | None = None, *, generated: bool = False) -> None:
        """`token`: the configured one; None makes a fresh random one. `generated` says the
        token was made by Switchboard, not configured (always so when `token` is None)."""
        self.generated = generated or token is None
        self.token = token or new_token()
        self._session = hmac.new(
            self.token.encode(), b"switchboard web session", hashlib.sha256
        ).hexdigest()

    def matches(self, given: str) -> bool:
        """Whether `given` is the token (constant-time)."""
        return hmac.compare_digest(given.encode(), self.token.encode())

    def credential(self, request: web.Request) -> Credential | None:
        """How `request` proved it holds the token, or None."""
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value and self.matches(value.strip()):
            return "bearer"
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self._session.encode()):
            return "cookie"
        return None

    def sign_in(self, response: web.StreamResponse) -> None:
        """Give the browser its session cookie."""
        response.set_cookie(COOKIE, self._session, httponly=True, samesite="Strict", path="/")

    @staticmethod
    def sign_out(response: web.StreamResponse) -> None:
        """Take the session cookie back."""
        response.del_cookie(COOKIE, path="/")

    @staticmethod
    def foreign_write(request: web.Request, credential: Credential | None) -> str | None:
        """Why a write must be refused as coming from another site, or None if it may go on."""
        if request.method in _SAFE_METHODS:
            return None
        origin = request.headers.get("Origin")
        if origin is None:
            if request.headers.get("Sec-Fetch-Site", "same-origin") not in (
                "same-origin",
                "none",
            ):
                return "a write from another site"
            # API clients send no Origin; a browser always does on a write.
            return None if credential == "bearer" else "a write without an Origin header"
        if origin != f"{request.scheme}://{request.host}":
            return "a write from another origin"
        return None
