"""A loopback fake of the two search APIs `web_search` speaks.

- Brave Search: `GET /res/v1/web/search?q=...&count=N` with the key in `X-Subscription-Token`;
  answers `{"type": "search", "query": {...}, "web": {"type": "search", "results": [...]}}`,
  each result with `title`, `url` and `description` (query words in `<strong>` tags, as the
  real API marks them). A missing or wrong key is HTTP 422 with an `ErrorResponse` whose
  code is `SUBSCRIPTION_TOKEN_INVALID`, as the real API answers; `count` above 20 is a 422.
  The base URL for `BRAVE_BASE_URL` is `brave_url`.
- SearXNG: `GET /search?q=...&format=json` answers `{"query", "number_of_results",
  "results": [...]}`, each result with `title`, `url` and `content`; without `format=json`
  it answers 403, as an instance with the JSON format off does. `SEARXNG_URL` is `url`.

Test controls: `hits` (what every query finds), `fail_next(status)` (the next searches
answer that status), `stall_next()` (the next search is never answered until the fake
closes: a slow API) and `requests` (every search received).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

__all__ = ["FakeSearch", "Hit", "SearchRequest"]

BRAVE_PATH = "/res/v1/web/search"


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SearchRequest:
    api: str  # "brave" or "searxng"
    params: dict[str, str]
    headers: dict[str, str] = field(repr=False)


_BRAVE_ERRORS = {
    401: "SUBSCRIPTION_TOKEN_INVALID",
    422: "SUBSCRIPTION_TOKEN_INVALID",
    429: "RATE_LIMITED",
    500: "INTERNAL_SERVER_ERROR",
    503: "SERVICE_UNAVAILABLE",
}


class FakeSearch:
    """Brave Search and SearXNG on 127.0.0.1; the Brave side accepts `api_key`."""

    def __init__(self, api_key: str = "brave-test-key", hits: list[Hit] | None = None) -> None:
        self.api_key = api_key
        self.hits: list[Hit] = list(hits or [])
        self.requests: list[SearchRequest] = []
        self._failures: deque[int] = deque()
        self._stalls = 0
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`: the SearXNG instance's address."""
        if self._port is None:
            raise RuntimeError("FakeSearch is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def brave_url(self) -> str:
        """The Brave Search API's base (`BRAVE_BASE_URL`)."""
        return f"{self.url}/res/v1"

    def fail_next(self, *statuses: int) -> None:
        """The next searches answer these HTTP statuses, one each, with the API's error body."""
        self._failures.extend(statuses)

    def stall_next(self) -> None:
        """The next search gets no answer until the fake closes (or the client gives up)."""
        self._stalls += 1

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(BRAVE_PATH, self._brave)
        app.router.add_get("/search", self._searxng)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    async def close(self) -> None:
        self._release.set()
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

    async def _held(self) -> bool:
        """Whether this search stalls (it then waits for the close) or fails."""
        if self._stalls:
            self._stalls -= 1
            await self._release.wait()
            return True
        return False

    async def _brave(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(SearchRequest("brave", dict(request.query), dict(request.headers)))
        if await self._held():
            return web.Response(status=503)
        if request.headers.get("X-Subscription-Token") != self.api_key:
            return _brave_error(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided token is invalid.")
        if self._failures:
            status = self._failures.popleft()
            return _brave_error(status, _BRAVE_ERRORS.get(status, "ERROR"), "Failed.")
        query = request.query.get("q", "")
        count = int(request.query.get("count", "20"))
        if not query or not 1 <= count <= 20:
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s).")
        results = [
            {
                "title": hit.title,
                "url": hit.url,
                "is_source_local": False,
                "description": _marked(hit.snippet, query),
                "profile": {"name": hit.url.split("/")[2]},
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
            }
            for hit in self.hits[:count]
        ]
        return web.json_response(
            {
                "type": "search",
                "query": {"original": query, "more_results_available": False},
                "mixed": {"type": "mixed", "main": []},
                "web": {"type": "search", "results": results, "family_friendly": True},
            }
        )

    async def _searxng(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(SearchRequest("searxng", dict(request.query), dict(request.headers)))
        if await self._held():
            return web.Response(status=503)
        if request.query.get("format") != "json":
            return web.Response(status=403, text="Forbidden")
        if self._failures:
            status = self._failures.popleft()
            return web.Response(status=status, text=f"HTTP {status}")
        query = request.query.get("q", "")
        results = [
            {
                "url": hit.url,
                "title": hit.title,
                "content": hit.snippet,
                "engine": "duckduckgo",
                "engines": ["duckduckgo"],
                "score": 1.0,
                "category": "general",
            }
            for hit in self.hits
        ]
        return web.json_response(
            {
                "query": query,
                "number_of_results": 0,
                "results": results,
                "answers": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )


def _marked(snippet: str, query: str) -> str:
    """The snippet with the query's words in `<strong>`, as Brave marks them."""
    words = {w.lower() for w in query.split()}
    return " ".join(f"<strong>{w}</strong>" if w.lower() in words else w for w in snippet.split())


def _brave_error(status: int, code: str, detail: str) -> web.Response:
    body: dict[str, Any] = {
        "type": "ErrorResponse",
        "error": {"id": "fake-error", "status": status, "code": code, "detail": detail},
        "time": 0,
    }
    return web.json_response(body, status=status)
