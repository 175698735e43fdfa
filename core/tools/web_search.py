"""`web_search`: a web search through the configured search API, as titles, URLs and snippets.

Two APIs are spoken (docs/decisions/0002-web-search-api.md): the Brave Search API (hosted,
a subscription key in the `X-Subscription-Token` header) and a SearXNG instance's JSON API
(self-hosted, `/search?format=json`, no key). The tool is built only when one is configured;
unconfigured, it is not registered and the model never sees it.

The API's address is the operator's, so it is not held to `web_fetch`'s public-address rule (a
SearXNG instance usually runs next to the bot). The results are the web's words: they come
back fenced as untrusted content with `web_fetch`'s fence, and the model can `web_fetch` a
result's URL for the page itself. A failed search is a `ToolError` of one sentence; the key
is never part of it (nor of anything else this module writes).
"""

from __future__ import annotations

import asyncio
import html
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from core.errors import ToolError
from core.safety import fence_untrusted
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = [
    "BRAVE_BASE_URL",
    "MAX_RESULTS_CAP",
    "WEB_SEARCH",
    "SearchResult",
    "WebSearchSettings",
    "format_results",
    "web_search_tool",
]

WEB_SEARCH = "web_search"
BRAVE_BASE_URL = "https://api.search.brave.com/res/v1"
# The most results any setting may ask for (Brave's `count` stops at 20;
# SWITCHBOARD_SEARCH_MAX_RESULTS has the same bound).
MAX_RESULTS_CAP = 20
_SNIPPET_CHARS = 400
_TAGS = re.compile(r"<[^>]{0,200}>")


class WebSearchSettings(BaseModel):
    """Which search API `web_search` asks, and its limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api: Literal["brave", "searxng"]
    # Brave: the API's base (`.../res/v1`); SearXNG: the instance's address.
    url: str = Field(min_length=1)
    api_key: SecretStr | None = None
    max_results: int = Field(default=5, ge=1, le=MAX_RESULTS_CAP)
    timeout: float = Field(default=10.0, gt=0)
    user_agent: str = "Switchboard-web_search/1.0"

    @property
    def api_name(self) -> str:
        """The API as people call it, for messages and the model's note."""
        return "Brave Search" if self.api == "brave" else "SearXNG"


class WebSearchArgs(BaseModel):
    query: str = Field(
        description="What to search the web for, as you would type it into a search engine.",
        min_length=1,
        max_length=400,
    )


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


def format_results(query: str, results: list[SearchResult], settings: WebSearchSettings) -> str:
    """The results as numbered title, URL and snippet lines, fenced as untrusted content."""
    if results:
        lines = [
            f"{n}. {r.title or '(no title)'}\n   {r.url}\n   {r.snippet or '(no snippet)'}"
            for n, r in enumerate(results, start=1)
        ]
        body = "\n".join(lines)
    else:
        body = "(no results)"
    return fence_untrusted(
        body,
        source=f"Web search results for {query!r} from {settings.api_name}; read a result's "
        "page with web_fetch",
    )


def _plain(text: object, limit: int) -> str:
    """A result field as one line of plain text: tags and entities gone, at most `limit`."""
    if not isinstance(text, str):
        return ""
    flat = " ".join(html.unescape(_TAGS.sub("", text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _results(api: str, payload: Any, limit: int) -> list[SearchResult]:
    if not isinstance(payload, dict):
        return []
    if api == "brave":
        web = payload.get("web")
        items = web.get("results") if isinstance(web, dict) else None
        snippet_key = "description"
    else:
        items = payload.get("results")
        snippet_key = "content"
    found: list[SearchResult] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        url = item["url"].strip()
        if not url.startswith(("http://", "https://")):
            continue
        title = _plain(item.get("title"), 200)
        found.append(SearchResult(title, url, _plain(item.get(snippet_key), _SNIPPET_CHARS)))
        if len(found) == limit:
            break
    return found


def _failure(status: int, settings: WebSearchSettings, body: Any) -> str:
    """The one sentence a failed search answers, by HTTP status."""
    api_name = settings.api_name
    code = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = str(body["error"].get("code") or "")
    if settings.api == "searxng" and status == 403:
        return (
            f"{api_name} refused the search (HTTP 403): the instance does not answer JSON "
            "(json missing from search.formats in its settings.yml) or refuses this client; "
            "the bot's operator has to fix it."
        )
    if status in (401, 403) or "TOKEN" in code:
        return (
            f"{api_name} refused the search (HTTP {status}): the search API key or access is "
            "not valid; the bot's operator has to fix it."
        )
    if 300 <= status < 400:
        return (
            f"{api_name} answered a redirect (HTTP {status}), which is not followed: check its URL."
        )
    if status == 429:
        return f"{api_name} is rate-limiting searches (HTTP 429); try again later."
    if status >= 500:
        return f"{api_name} failed (HTTP {status}); try again later."
    return f"{api_name} answered HTTP {status} to the search."


class _Searcher:
    def __init__(self, settings: WebSearchSettings) -> None:
        self.settings = settings

    def _request(self, query: str) -> tuple[str, dict[str, str], dict[str, str]]:
        """URL, query parameters and headers of the search."""
        s = self.settings
        headers = {"User-Agent": s.user_agent, "Accept": "application/json"}
        base = s.url.rstrip("/")
        if s.api == "brave":
            if s.api_key is not None:
                headers["X-Subscription-Token"] = s.api_key.get_secret_value()
            return f"{base}/web/search", {"q": query, "count": str(s.max_results)}, headers
        return f"{base}/search", {"q": query, "format": "json"}, headers

    async def search(self, query: str) -> list[SearchResult]:
        import aiohttp  # only when a search runs: kept off every process's start-up

        url, params, headers = self._request(query)
        name = self.settings.api_name
        try:
            async with (
                asyncio.timeout(self.settings.timeout),
                aiohttp.ClientSession(trust_env=False, headers=headers) as session,
                session.get(url, params=params, allow_redirects=False) as response,
            ):
                try:
                    payload = await response.json(content_type=None)
                except ValueError:
                    payload = None
                status = response.status
        except TimeoutError:
            raise ToolError(
                f"{name} did not answer within {self.settings.timeout:g} s; try again later."
            ) from None
        except aiohttp.ClientError as exc:
            raise ToolError(f"Could not reach {name} ({type(exc).__name__}).") from None
        if status != 200:
            raise ToolError(_failure(status, self.settings, payload))
        if not isinstance(payload, dict):
            raise ToolError(f"{name} answered something other than JSON search results.")
        return _results(self.settings.api, payload, self.settings.max_results)


def web_search_tool(settings: WebSearchSettings) -> Tool[Any]:
    """The `web_search` tool (read-only; offered wherever `web_fetch` is)."""
    searcher = _Searcher(settings)

    async def run(args: WebSearchArgs, context: ToolContext) -> str:
        query = " ".join(args.query.split())
        if not query:
            raise ToolError("The search query is empty.")
        return format_results(query, await searcher.search(query), settings)

    return Tool(
        name=WEB_SEARCH,
        description=(
            f"Search the web ({settings.api_name}) and return up to {settings.max_results} "
            "results, each a title, URL and snippet. Read a result's page with web_fetch."
        ),
        args=WebSearchArgs,
        tier=SafetyTier.READ_ONLY,
        run=run,
    )
