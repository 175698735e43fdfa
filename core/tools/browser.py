"""`browser`: a headless chromium the model drives in `full` mode, and its state each step.

The model opens a page, clicks, types, reads and goes back with one tool (`browser`, an
`action` and its arguments). Each session gets a browser context of its own (its own cookies
and pages), made on its first `open` and closed when the session's turn ends
(`Browsing.turn_ended`, called by the runtime through `core/step_state.py`), after
`idle_seconds` without an action, or when the process stops (`Browsing.aclose`). The chromium
process itself runs only while some session has a page open.

While a page is open, every model call of the turn carries a short state block (URL, title,
the start of the visible text, the last action's outcome) in its turn context, redacted and
fenced as untrusted; it is never stored in the conversation (decision record 0027).

Safety: the same rule as `web_fetch` (`public_address`) for every connection the pages make
(navigations, each hop of a redirect, images, scripts' fetches, websockets): each context
sends everything through a proxy of its own (`core/tools/browser_proxy.py`) that resolves the
host, refuses it unless every address is public, and connects to the address it checked.
Service workers and downloads are off. Playwright drives Debian's chromium
(`executable_path`); it never downloads a browser. The extra `switchboard[browser]` installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.errors import ToolError
from core.redact import Redactor
from core.safety import fence_untrusted
from core.tools.base import SafetyTier, Tool, ToolContext
from core.tools.web_fetch import Resolve, checked_url, public_address, system_resolve

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright
    from yarl import URL

    from core.tools.browser_proxy import CheckedProxy

__all__ = ["BROWSER", "BrowserArgs", "BrowserSettings", "Browsing", "browser_tool", "unavailable"]

BROWSER = "browser"

log = logging.getLogger(__name__)

_BLANK_LINES = re.compile(r"\n\s*\n+")


class BrowserSettings(BaseModel):
    """`[browser]` in profile.toml: off unless `enabled`; offered in `full` mode only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    # Debian's chromium; Playwright never downloads one.
    executable_path: str = "/usr/bin/chromium"
    # A session's browser context closes after this many seconds without an action.
    idle_seconds: float = Field(default=300.0, gt=0)
    # Seconds one page action (a load, a click) may take.
    timeout: float = Field(default=15.0, gt=0, le=120)
    # Characters of visible text `read` returns, and the state block shows.
    max_chars: int = Field(default=8_000, ge=100)
    state_chars: int = Field(default=1_000, ge=100)
    # Tests only: lets pages reach loopback addresses (never private or metadata ones).
    allow_loopback: bool = False


class BrowserArgs(BaseModel):
    """One browser action."""

    action: Literal["open", "click", "type", "read", "back", "close"] = Field(
        description=(
            "open: load `url`. click: click the element showing `text`, or matching "
            "`selector`. type: fill the field matching `selector` with `text` (`submit` "
            "presses Enter after). read: the page's visible text. back: the previous page. "
            "close: close the browser."
        )
    )
    url: str | None = Field(default=None, max_length=4000, description="For open.")
    text: str | None = Field(
        default=None, max_length=4000, description="For click (visible text) and type."
    )
    selector: str | None = Field(
        default=None, max_length=1000, description="A CSS selector, for click and type."
    )
    submit: bool = Field(default=False, description="For type: press Enter after typing.")

    @model_validator(mode="after")
    def _needs(self) -> BrowserArgs:
        if self.action == "open" and not self.url:
            raise ValueError("open needs a url")
        if self.action == "click" and not (self.text or self.selector):
            raise ValueError("click needs the text of what to click, or a selector")
        if self.action == "type" and not (self.selector and self.text is not None):
            raise ValueError("type needs a selector and the text to type")
        return self


def unavailable(settings: BrowserSettings) -> str | None:
    """Why the enabled browser cannot be offered here (one line), or None if it can."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install 'switchboard[browser]')"
    if not Path(settings.executable_path).is_file():
        return f"no chromium at {settings.executable_path} (apt-get install chromium)"
    return None


@dataclass
class _Tab:
    """A session's browser context, its page, and what the model last saw of it."""

    context: BrowserContext
    page: Page
    proxy: CheckedProxy
    used: float
    url: str = ""
    title: str = ""
    text: str = ""
    outcome: str = ""


class Browsing:
    """The browser of this process: a context per session, chromium running while any is open.

    `block` is the state the runtime shows before each model call (a `StepState`).
    """

    def __init__(
        self,
        settings: BrowserSettings,
        *,
        redactor: Redactor | None = None,
        resolve: Resolve = system_resolve,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._redact = redactor or Redactor()
        self._resolve = resolve
        self._clock = clock
        self._tabs: dict[str, _Tab] = {}
        # Starting, stopping and the set of contexts change under it; page actions do not.
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._reaper: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether chromium is running (some session has a page open)."""
        return self._browser is not None

    def is_open(self, session_id: str) -> bool:
        """Whether `session_id` has a page open."""
        return session_id in self._tabs

    def block(self, session_id: str) -> str:
        """The open page's state for the model's next call; "" when no page is open."""
        tab = self._tabs.get(session_id)
        if tab is None or not tab.url:
            return ""
        text = _cut(tab.text, self.settings.state_chars)
        head = (
            "[Browser state: a page is open in this conversation's browser (tool `browser`); "
            "this block is refreshed before every model call.]\n"
            f"URL: {tab.url}\nTitle: {tab.title or '(none)'}\nLast action: {tab.outcome}\n"
        )
        return self._redact(head + fence_untrusted(text, source="Visible text of the page"))

    async def turn_ended(self, session_id: str) -> None:
        """The session's turn is over: its context closes."""
        await self.close(session_id)

    async def act(self, session_id: str, args: BrowserArgs) -> str:
        """Run one action in the session's page; the text the model reads back."""
        if args.action == "close":
            closed = await self.close(session_id)
            return "Closed the browser." if closed else "No page was open."
        tab = await self._tab_for(session_id, args)
        tab.used = self._clock()
        tab.proxy.refused.clear()
        await self._perform(tab, args)
        limit = self.settings.max_chars if args.action == "read" else self.settings.state_chars
        return f"{tab.outcome}\nURL: {tab.url}\nTitle: {tab.title or '(none)'}\n" + fence_untrusted(
            _cut(tab.text, limit), source=f"Visible text of {tab.url}"
        )

    async def _tab_for(self, session_id: str, args: BrowserArgs) -> _Tab:
        """The session's tab for `args`: made by `open` (once its URL passed the check)."""
        if args.action == "open":
            await self._check(args.url or "")
            return await self._tab(session_id)
        tab = self._tabs.get(session_id)
        if tab is None:
            raise ToolError("No page is open: use action 'open' with a url first.")
        return tab

    async def _perform(self, tab: _Tab, args: BrowserArgs) -> None:
        """Do the action and note what the page shows after it; `ToolError` when it failed
        or the page it led to was refused (the outcome says so in the state block too)."""
        from playwright.async_api import Error as PageError

        try:
            tab.outcome = await _do(tab.page, args)
        except PageError as exc:
            why = next(iter(tab.proxy.refused.values()), None) or _first_line(exc)
            tab.outcome = f"{args.action} failed: {why}"
            await self._look(tab)
            raise ToolError(f"The browser's {tab.outcome}") from None
        await self._look(tab)
        page_refused = tab.proxy.refused.get(tab.url.split("#", 1)[0])
        if page_refused is not None:
            # The page itself was refused (the proxy's 403 stands in its place).
            tab.outcome = f"{args.action} failed: {page_refused}"
            raise ToolError(f"The browser's {tab.outcome}")
        if tab.proxy.refused:  # a part of the page (an image, a script's request) was
            refused = len(tab.proxy.refused)
            tab.outcome += f" {refused} of its requests were refused (not public addresses)."

    async def close(self, session_id: str) -> bool:
        """Close the session's context (and chromium once no session has one); False if it
        had none."""
        async with self._lock:
            tab = self._tabs.pop(session_id, None)
            if tab is not None:
                with contextlib.suppress(Exception):  # chromium may be gone already
                    await tab.context.close()
                await tab.proxy.close()
            if not self._tabs:
                await self._stop()
        return tab is not None

    async def close_idle(self) -> list[str]:
        """Close the contexts unused for `idle_seconds`; the sessions they belonged to."""
        now = self._clock()
        idle = [s for s, t in self._tabs.items() if now - t.used >= self.settings.idle_seconds]
        for session_id in idle:
            await self.close(session_id)
        return idle

    async def aclose(self) -> None:
        """Close every context and stop chromium (the process is stopping)."""
        for session_id in list(self._tabs):
            await self.close(session_id)
        async with self._lock:
            await self._stop()

    async def _check(self, raw: str) -> None:
        """Refuse a URL `web_fetch` would refuse, with its reason, before loading it."""
        await self._address(checked_url(raw))

    async def _address(self, url: URL) -> str:
        """Where to connect for `url`: a public address (`web_fetch`'s rule), else ToolError."""
        return await public_address(
            url, self._resolve, allow_loopback=self.settings.allow_loopback, who=BROWSER
        )

    async def _tab(self, session_id: str) -> _Tab:
        """The session's tab, made (and chromium started) if it has none; `ToolError` when
        chromium cannot start or make one."""
        from playwright.async_api import Error as PageError

        async with self._lock:
            tab = self._tabs.get(session_id)
            if tab is not None:
                return tab
            try:
                tab = await self._new_tab()
            except PageError as exc:
                if not self._tabs:
                    await self._stop()
                raise ToolError(f"The browser could not start: {_first_line(exc)}") from None
            self._tabs[session_id] = tab
            return tab

    async def _new_tab(self) -> _Tab:
        """A new context behind a proxy of its own, with one page (under the lock)."""
        from core.tools.browser_proxy import CheckedProxy

        browser = await self._start()
        proxy = CheckedProxy(self._address, timeout=self.settings.timeout)
        server = await proxy.start()
        context: BrowserContext | None = None
        try:
            # Everything goes through the proxy, loopback too (chromium skips a proxy for
            # loopback addresses unless told `<-loopback>`).
            context = await browser.new_context(
                proxy={"server": server, "bypass": "<-loopback>"},
                service_workers="block",
                accept_downloads=False,
            )
            context.set_default_timeout(self.settings.timeout * 1000)
            context.set_default_navigation_timeout(self.settings.timeout * 1000)
            page = await context.new_page()
        except BaseException:
            if context is not None:
                with contextlib.suppress(Exception):
                    await context.close()
            await proxy.close()
            raise
        return _Tab(context=context, page=page, proxy=proxy, used=self._clock())

    async def _look(self, tab: _Tab) -> None:
        """Note the page's URL, title and visible text, as the model will be shown them."""
        try:
            tab.url, tab.title = tab.page.url, await tab.page.title()
            text = await tab.page.locator("body").inner_text()
        except Exception as exc:  # a page mid-navigation, or closed: no text this time
            log.debug("could not read the page: %s", _first_line(exc))
            text = ""
        tab.text = _BLANK_LINES.sub("\n\n", text).strip()

    async def _start(self) -> Browser:
        if self._browser is None:
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.settings.executable_path, headless=True
                )
            except Exception:
                await self._playwright.stop()
                self._playwright = None
                raise
            self._reaper = asyncio.create_task(self._reap(), name="browser-idle")
        return self._browser

    async def _stop(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None and reaper is not asyncio.current_task():
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        browser, self._browser = self._browser, None
        playwright, self._playwright = self._playwright, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if playwright is not None:
            await playwright.stop()

    async def _reap(self) -> None:
        """Close idle contexts while chromium runs (owned: cancelled when it stops)."""
        while self._reaper is asyncio.current_task():
            await asyncio.sleep(self.settings.idle_seconds / 2)
            await self.close_idle()


async def _do(page: Page, args: BrowserArgs) -> str:
    """Do `args.action` on `page`; what happened, in a few words."""
    match args.action:
        case "open":
            response = await page.goto(args.url or "", wait_until="domcontentloaded")
            status = f" (HTTP {response.status})" if response and response.status >= 400 else ""
            return f"Opened {args.url}{status}."
        case "click":
            target = page.get_by_text(args.text) if args.text else page.locator(args.selector or "")
            await target.first.click()
            await page.wait_for_load_state("domcontentloaded")
            return f"Clicked {args.text!r}." if args.text else f"Clicked {args.selector!r}."
        case "type":
            field = page.locator(args.selector or "").first
            await field.fill(args.text or "")
            if args.submit:
                await field.press("Enter")
                await page.wait_for_load_state("domcontentloaded")
            return f"Typed into {args.selector!r}" + (" and pressed Enter." if args.submit else ".")
        case "back":
            response = await page.go_back(wait_until="domcontentloaded")
            return "Went back." if response is not None else "There was no earlier page."
        case _:
            return "Read the page."


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text or "(no visible text)"
    return f"{text[:limit]}\n[cut at {limit} characters]"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def browser_tool(browsing: Browsing) -> Tool[Any]:
    """The `browser` tool (side-effecting, so offered in `full` mode only)."""

    async def run(args: BrowserArgs, context: ToolContext) -> str:
        return await browsing.act(context.session_id, args)

    return Tool(
        name=BROWSER,
        description=(
            "Drive a headless web browser: open a public web page, click links or buttons, "
            "type into fields, read the visible text, go back, close. While a page is open, "
            "its URL, title and the start of its text are shown to you before every step. "
            "Private and local addresses are refused."
        ),
        args=BrowserArgs,
        tier=SafetyTier.SIDE_EFFECTING,
        run=run,
    )
