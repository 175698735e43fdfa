"""`web_fetch`: read a public web page or text file for the model, and nothing else.

Safety (server-side request forgery is the risk: the bot's network is not the asker's):

- GET only, `http` and `https` only, no credentials in the URL, at most `max_redirects`
  redirects, each followed here (not by the HTTP client) so every hop is checked.
- Every address the name resolves to must be public: loopback, private, link-local
  (169.254.0.0/16 holds the cloud metadata service), multicast, reserved, unspecified,
  shared (100.64.0.0/10) and documentation ranges are refused, in IPv4 and IPv6, including
  IPv4 addresses carried inside IPv6 (`::ffff:127.0.0.1`, NAT64, 6to4, Teredo).
- DNS rebinding cannot swap the address after the check: the name is resolved once per hop,
  the answer checked, and the connection made through a resolver that knows only that
  checked address (`_pinned_resolver_class`). The URL keeps its host name, so the `Host` header,
  TLS SNI and certificate check are for the name, while the socket goes to the checked IP.
- At most `max_bytes` (2 MB) are read, decompressed, and the whole fetch takes at most
  `timeout` (15 s). Proxies from the environment are ignored.

HTML becomes text with html2text: it is maintained, pure Python with no dependencies, keeps
headings, lists and links (which the model can follow with another fetch) and drops scripts
and styles. trafilatura extracts the main article better but brings lxml and a dozen other
packages; markdownify needs BeautifulSoup. Other text types are returned as they are; binary
types are refused politely. The result is fenced as untrusted content for the model.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ToolError
from core.safety import fence_untrusted
from core.tools.base import SafetyTier, Tool, ToolContext

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

__all__ = [
    "WEB_FETCH",
    "Resolve",
    "WebFetchSettings",
    "address_refusal",
    "checked_url",
    "public_address",
    "system_resolve",
    "web_fetch_tool",
]

WEB_FETCH = "web_fetch"

# Host name and port to the IP addresses it resolves to.
Resolve = Callable[[str, int], Awaitable[list[str]]]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-ndjson",
        "application/rss+xml",
        "application/atom+xml",
    }
)
# Known cloud metadata endpoints; all of them are non-public anyway, named for the message.
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_CHUNK = 64 * 1024


class WebFetchSettings(BaseModel):
    """Limits of `web_fetch`. `allow_loopback` exists for tests against 127.0.0.1 only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bytes: int = Field(default=2 * 1024 * 1024, gt=0)
    timeout: float = Field(default=15.0, gt=0)
    max_redirects: int = Field(default=5, ge=0)
    # Characters of text handed to the model; the rest is cut with a note.
    max_chars: int = Field(default=12_000, gt=0)
    # Tests only: lets a fetch reach loopback addresses (never private or metadata ones).
    allow_loopback: bool = False
    user_agent: str = "Switchboard-web_fetch/1.0"


class WebFetchArgs(BaseModel):
    url: str = Field(
        description="The http or https address of a public web page or text file.",
        max_length=4000,
    )


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for `host` (every one, IPv4 and IPv6)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def address_refusal(address: str, *, allow_loopback: bool = False) -> str | None:
    """Why `address` may not be fetched from ("a private address"), or None if it is public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return address_refusal(str(embedded), allow_loopback=allow_loopback)
    checks = (
        (ip in _METADATA, "a cloud metadata address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    for refused, why in checks:
        if refused:
            return None if why == "a loopback address" and allow_loopback else why
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


@cache
def _pinned_resolver_class() -> type[Any]:
    """The resolver class, made on first use: aiohttp is imported only when a page is
    fetched (it is a tenth of a second of every start-up otherwise)."""
    from aiohttp.abc import AbstractResolver, ResolveResult

    class PinnedResolver(AbstractResolver):
        """Answers only for the checked host, only with the checked address."""

        def __init__(self, host: str, address: str) -> None:
            self._host = host
            self._address = address

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            if host != self._host:
                raise OSError(f"{host} was not checked")
            ip = ipaddress.ip_address(self._address)
            return [
                ResolveResult(
                    hostname=host,
                    host=self._address,
                    port=port,
                    family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                    proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            ]

        async def close(self) -> None:
            return None

    return PinnedResolver


@dataclass(frozen=True)
class _Page:
    url: str
    content_type: str
    charset: str | None
    body: bytes
    cut: bool


class _Fetcher:
    def __init__(self, settings: WebFetchSettings, resolve: Resolve) -> None:
        self.settings = settings
        self.resolve = resolve

    async def fetch(self, raw_url: str) -> _Page:
        url = _checked_url(raw_url)
        for _ in range(self.settings.max_redirects + 1):
            address = await self._checked_address(url)
            page_or_next = await self._get(url, address)
            if isinstance(page_or_next, _Page):
                return page_or_next
            url = page_or_next
        raise ToolError(f"Too many redirects (more than {self.settings.max_redirects}).")

    async def _checked_address(self, url: URL) -> str:
        return await public_address(
            url, self.resolve, allow_loopback=self.settings.allow_loopback, who=WEB_FETCH
        )

    async def _get(self, url: URL, address: str) -> _Page | URL:
        import aiohttp
        from yarl import URL

        connector = aiohttp.TCPConnector(
            resolver=_pinned_resolver_class()(url.raw_host or "", address),
            use_dns_cache=False,
            force_close=True,
        )
        async with (
            aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.settings.user_agent, "Accept": "*/*"},
            ) as session,
            session.get(url, allow_redirects=False) as response,
        ):
            location = response.headers.get("Location")
            if response.status in _REDIRECTS and location:
                return _checked_url(str(url.join(URL(location))))
            if response.status >= 400:
                raise ToolError(f"{url} answered HTTP {response.status} {response.reason or ''}.")
            body, cut = await self._read(response)
            return _Page(str(url), response.content_type, response.charset, body, cut)

    async def _read(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        body = bytearray()
        limit = self.settings.max_bytes
        async for chunk in response.content.iter_chunked(_CHUNK):
            if len(body) + len(chunk) > limit:
                body += chunk[: limit - len(body)]
                return bytes(body), True  # stop reading: the rest is never downloaded
            body += chunk
        return bytes(body), False


async def public_address(
    url: URL, resolve: Resolve, *, allow_loopback: bool = False, who: str = WEB_FETCH
) -> str:
    """The address to connect to for `url`'s host: every address the host resolves to must be
    public (`address_refusal`), else `ToolError` saying which one is not; `who` names the tool
    in the message (`browser` checks every request of its pages with this too)."""
    host = url.raw_host or ""
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        try:
            addresses = await resolve(host, url.port or 0)
        except OSError as exc:
            raise ToolError(f"Could not find the address of {host}: {exc}.") from exc
    if not addresses:
        raise ToolError(f"Could not find the address of {host}.")
    for address in addresses:
        why = address_refusal(address, allow_loopback=allow_loopback)
        if why is not None:
            raise ToolError(
                f"Refused: {host} resolves to {address}, {why}. {who} reads public web pages only."
            )
    return addresses[0]


def checked_url(raw: str) -> URL:
    """`raw` as a URL `web_fetch` (and `browser`) may ask for: http or https, a host, no user
    name or password; `ToolError` saying what is wrong otherwise."""
    return _checked_url(raw)


def _checked_url(raw: str) -> URL:
    from yarl import URL  # with aiohttp, on the first fetch: not part of every start-up

    try:
        url = URL(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ToolError(f"Not a valid URL: {raw!r}.") from exc
    if url.scheme not in ("http", "https"):
        raise ToolError(f"Refused: only http and https URLs are fetched, not {url.scheme!r}.")
    if not url.raw_host:
        raise ToolError(f"Not a valid URL (no host): {raw!r}.")
    if url.user or url.password:
        raise ToolError("Refused: URLs with a user name or password are not fetched.")
    return url.with_fragment(None)


def _is_text(content_type: str, body: bytes) -> bool:
    if content_type.startswith("text/") or content_type in _TEXT_TYPES:
        return True
    if content_type.endswith(("+json", "+xml")):
        return True
    # No type given: text if it has no NUL bytes.
    return content_type in ("", "application/octet-stream") and b"\0" not in body[:4096]


def _html_to_text(html: str) -> str:
    import html2text  # only when a page is fetched: kept off every process's start-up

    converter = html2text.HTML2Text()
    converter.body_width = 0  # no hard wrapping
    converter.ignore_images = True
    converter.unicode_snob = True
    return converter.handle(html).strip()


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


async def _render(page: _Page, settings: WebFetchSettings) -> str:
    content_type = page.content_type.lower()
    looks_html = content_type in _HTML_TYPES or (
        content_type in ("", "application/octet-stream")
        and page.body[:512].lstrip().lower().startswith((b"<!doctype html", b"<html"))
    )
    if looks_html:
        # Converting a large page is CPU work; it stays off the event loop.
        text = await asyncio.to_thread(_html_to_text, _decode(page.body, page.charset))
    elif _is_text(content_type, page.body):
        text = _decode(page.body, page.charset)
    else:
        raise ToolError(
            f"{page.url} is {content_type or 'binary data'}, which web_fetch cannot read: "
            "it returns web pages and text only."
        )
    notes = []
    if page.cut:
        notes.append(f"[download stopped at {settings.max_bytes} bytes; the rest was not read]")
    if len(text) > settings.max_chars:
        text = text[: settings.max_chars]
        notes.append(f"[text cut at {settings.max_chars} characters]")
    body = "\n".join([text or "(empty page)", *notes])
    return fence_untrusted(body, source=f"Content fetched from {page.url}")


def web_fetch_tool(
    settings: WebFetchSettings | None = None, *, resolve: Resolve = system_resolve
) -> Tool[Any]:
    """The `web_fetch` tool (read-only; offered in `safe-chat`, `discord` and `full`)."""
    fetcher = _Fetcher(settings or WebFetchSettings(), resolve)

    async def run(args: WebFetchArgs, context: ToolContext) -> str:
        import aiohttp

        try:
            async with asyncio.timeout(fetcher.settings.timeout):
                page = await fetcher.fetch(args.url)
        except TimeoutError:
            raise ToolError(
                f"Fetching {args.url} took longer than {fetcher.settings.timeout:g} s; gave up."
            ) from None
        except aiohttp.ClientError as exc:
            raise ToolError(
                f"Could not fetch {args.url}: {type(exc).__name__}: {exc}".rstrip(": ") + "."
            ) from exc
        return await _render(page, fetcher.settings)

    return Tool(
        name=WEB_FETCH,
        description=(
            "Fetch a public web page or text file by URL (http or https) and return its "
            "text. Web pages are turned into plain text with links. Private and local "
            f"addresses are refused; at most {fetcher.settings.max_bytes / 2**20:g} MB are read."
        ),
        args=WebFetchArgs,
        tier=SafetyTier.READ_ONLY,
        run=run,
    )
