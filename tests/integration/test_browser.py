"""The `browser` tool in Debian's headless chromium against a small aiohttp site on 127.0.0.1.

Loopback is reached only through the explicit test setting (`allow_loopback`); the tests that
check the fence run without it. The turn test goes through the real runtime and the OpenAI
provider on the scripted fake: the page's state must be in the model call after the action,
never in the stored conversation, and no chromium process may outlive the turn.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from core.backends.sql.store import SqlStore
from core.errors import ToolError
from core.messages import Message
from core.modes import FULL, SAFE_CHAT
from core.providers.openai import OpenAIProvider
from core.runtime import AgentRuntime, ChannelContext
from core.tools import ToolRegistry
from core.tools.browser import BROWSER, BrowserArgs, BrowserSettings, Browsing, browser_tool
from tests.fakes import FakeOpenAI, Text, ToolUse
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.local_server import LocalServer

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed: apt-get install chromium (`make test-deps`)",
)
TESTING = BrowserSettings(enabled=True, allow_loopback=True, executable_path=str(CHROMIUM))
CONTEXT = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")

HOME = """<!doctype html><html><head><title>Home</title></head><body>
<h1>Welcome</h1><p>Start here.</p><a href="/next">Next page</a>
<form action="/search"><input id="q" name="q"></form></body></html>"""
NEXT = """<!doctype html><html><head><title>Next</title></head><body>
<p>You reached the next page.</p></body></html>"""


# A page whose parts reach for private and metadata addresses.
NOSY = """<!doctype html><html><head><title>Nosy</title></head><body><p>Nosy page.</p>
<img src="http://10.0.0.1/x.png"><img src="http://[::ffff:169.254.169.254]/latest/">
</body></html>"""


class Site(LocalServer):
    """Two linked pages, a search form's answer, and a redirect to a private address."""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", _html(HOME))
        app.router.add_get("/next", _html(NEXT))
        app.router.add_get("/search", _search)
        app.router.add_get("/to-private", _to_private)
        app.router.add_get("/nosy", _html(NOSY))
        app.router.add_get("/connection", _connection)
        return app


def _html(body: str) -> Any:
    async def handle(_request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    return handle


async def _search(request: web.Request) -> web.Response:
    asked = request.query.get("q", "")
    return web.Response(
        text=f"<html><head><title>Search</title></head><body>Results for {asked}</body></html>",
        content_type="text/html",
    )


async def _connection(request: web.Request) -> web.Response:
    """Which `Connection` header came: the proxy sends `close`, chromium itself `keep-alive`."""
    return web.Response(text=f"Connection: {request.headers.get('Connection')}")


async def _to_private(_request: web.Request) -> web.Response:
    raise web.HTTPFound("http://10.0.0.1/admin")


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as served:
        yield served


@pytest.fixture
async def browsing() -> AsyncIterator[Browsing]:
    made = Browsing(TESTING)
    try:
        yield made
    finally:
        await made.aclose()


def chromium_pids() -> set[int]:
    """The chromium processes below this test process (not zombies)."""
    table: dict[int, tuple[int, str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        table[int(entry.name)] = (int(parent), name, state)

    def below_me(pid: int) -> bool:
        while pid in table and pid > 1:
            pid = table[pid][0]
            if pid == os.getpid():
                return True
        return False

    return {
        pid
        for pid, (_, name, state) in table.items()
        if "chrom" in name and state != "Z" and below_me(pid)
    }


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` that still run (not gone, not zombies)."""
    left = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":
            left.add(pid)
    return left


async def act(browsing: Browsing, action: str, session: str = "s1", **args: Any) -> str:
    return await browsing.act(session, BrowserArgs(action=action, **args))


async def test_open_read_click_type_and_back(site: Site, browsing: Browsing) -> None:
    opened = await act(browsing, "open", url=f"{site.origin}/")
    assert opened.startswith(f"Opened {site.origin}/.\nURL: {site.origin}/\nTitle: Home")
    assert "Welcome" in opened and "untrusted data" in opened

    assert "Start here." in await act(browsing, "read")
    clicked = await act(browsing, "click", text="Next page")
    assert f"URL: {site.origin}/next" in clicked and "You reached the next page." in clicked

    back = await act(browsing, "back")
    assert back.startswith("Went back.") and f"URL: {site.origin}/\n" in back
    typed = await act(browsing, "type", selector="#q", text="cats", submit=True)
    assert "Results for cats" in typed

    running = chromium_pids()
    assert running
    assert await act(browsing, "close") == "Closed the browser."
    assert not browsing.running and not alive(running)


async def test_an_action_without_an_open_page_is_a_correctable_error(browsing: Browsing) -> None:
    with pytest.raises(ToolError, match="No page is open"):
        await act(browsing, "read")
    assert await act(browsing, "close") == "No page was open."


async def test_loopback_is_refused_without_the_test_setting(site: Site) -> None:
    strict = Browsing(BrowserSettings(enabled=True, executable_path=str(CHROMIUM)))
    try:
        with pytest.raises(ToolError, match=r"127\.0\.0\.1, a loopback address"):
            await act(strict, "open", url=f"{site.origin}/")
        with pytest.raises(ToolError, match="only http and https"):
            await act(strict, "open", url="file:///etc/passwd")
        assert not strict.running  # refused before any browser started
    finally:
        await strict.aclose()


async def test_a_redirect_to_a_private_address_is_refused_in_the_browser(
    site: Site, browsing: Browsing
) -> None:
    with pytest.raises(ToolError, match=r"open failed: Refused: 10\.0\.0\.1 .*a private address"):
        await act(browsing, "open", url=f"{site.origin}/to-private")
    assert "Last action: open failed: Refused: 10.0.0.1" in browsing.block("s1")


async def test_the_parts_of_a_page_that_reach_private_addresses_are_refused(
    site: Site, browsing: Browsing
) -> None:
    opened = await act(browsing, "open", url=f"{site.origin}/nosy")
    assert opened.startswith(
        f"Opened {site.origin}/nosy. 2 of its requests were refused (not public addresses)."
    )


async def test_loopback_requests_go_through_the_checking_proxy_too(
    site: Site, browsing: Browsing
) -> None:
    # Chromium skips a proxy for loopback unless told not to; the proxy's `close` proves it
    # did not here.
    assert "Connection: close" in await act(browsing, "open", url=f"{site.origin}/connection")


async def test_stopping_closes_every_session_and_chromium(site: Site) -> None:
    browsing = Browsing(TESTING)
    await act(browsing, "open", session="a", url=f"{site.origin}/")
    await act(browsing, "open", session="b", url=f"{site.origin}/next")
    running = chromium_pids()
    assert running and browsing.is_open("a") and browsing.is_open("b")

    await browsing.aclose()

    assert not browsing.running and not browsing.is_open("a") and not alive(running)


async def test_an_idle_context_is_closed(site: Site) -> None:
    now = [100.0]
    browsing = Browsing(TESTING.model_copy(update={"idle_seconds": 60.0}), clock=lambda: now[0])
    try:
        await act(browsing, "open", session="a", url=f"{site.origin}/")
        now[0] += 59.0
        assert await browsing.close_idle() == []
        now[0] += 1.0
        assert await browsing.close_idle() == ["a"]
        assert not browsing.running and browsing.block("a") == ""
    finally:
        await browsing.aclose()


async def test_the_page_state_is_in_the_next_model_call_only_and_closed_after_the_turn(
    site: Site, fake_openai: FakeOpenAI, store: SqlStore, session_id: str
) -> None:
    browsing = Browsing(TESTING)
    provider = OpenAIProvider(api_key=TEST_API_KEY, base_url=fake_openai.url, timeout=30.0)
    runtime = AgentRuntime(
        provider=provider,
        model="gpt-4o-mini",
        tools=ToolRegistry([browser_tool(browsing)]),
        store=store,
        step_state=browsing,
    )
    during: list[set[int]] = []

    def answer(_request: dict[str, Any]) -> Text:
        during.append(chromium_pids())
        return Text("It says Welcome.")

    fake_openai.script(
        ToolUse([("call_1", BROWSER, {"action": "open", "url": f"{site.origin}/"})]), answer
    )
    try:
        events = [e async for e in runtime.run(session_id, Message.user("what is on it?"), CONTEXT)]
        # The turn is over: its context and chromium are gone before the process stops.
        still_running, left = browsing.running, alive(during[0] if during else set())
    finally:
        await browsing.aclose()
        await provider.aclose()

    assert type(events[-1]).__name__ == "RunCompleted"
    first, second = (r.json["messages"] for r in fake_openai.requests)
    assert not any("Browser state" in str(m.get("content")) for m in first)
    [state] = [m["content"] for m in second if "Browser state" in str(m.get("content"))]
    assert second.index(next(m for m in second if m["content"] == state)) == 1  # after system
    assert f"URL: {site.origin}/\nTitle: Home\nLast action: Opened {site.origin}/." in state
    assert "Welcome" in state and "untrusted data" in state
    stored = await store.list_messages(session_id)
    assert not any("Browser state" in m.text for m in stored)
    # Chromium ran while the model was asked again, and nothing of it is left after the turn.
    assert during and during[0]
    assert not still_running and not left


async def test_a_browser_that_cannot_start_is_one_sentence_for_the_model(site: Site) -> None:
    broken = Browsing(TESTING.model_copy(update={"executable_path": "/bin/false"}))
    try:
        with pytest.raises(ToolError, match=r"^The browser could not start: "):
            await act(broken, "open", url=f"{site.origin}/")
        assert not broken.running and not broken.is_open("s1")
    finally:
        await broken.aclose()


async def test_safe_chat_neither_offers_nor_runs_the_browser(
    site: Site, fake_openai: FakeOpenAI, store: SqlStore, session_id: str
) -> None:
    browsing = Browsing(TESTING)
    provider = OpenAIProvider(api_key=TEST_API_KEY, base_url=fake_openai.url, timeout=30.0)
    runtime = AgentRuntime(
        provider=provider,
        model="gpt-4o-mini",
        tools=ToolRegistry([browser_tool(browsing)]),
        store=store,
        step_state=browsing,
    )
    fake_openai.script(
        ToolUse([("call_1", BROWSER, {"action": "open", "url": f"{site.origin}/"})]),
        Text("I cannot browse here."),
    )
    shared = CONTEXT.model_copy(update={"mode": SAFE_CHAT, "platform": "telegram"})
    try:
        events = [e async for e in runtime.run(session_id, Message.user("open it"), shared)]
        ran = browsing.running or browsing.is_open(session_id)
    finally:
        await browsing.aclose()
        await provider.aclose()

    assert type(events[-1]).__name__ == "RunCompleted"
    first, second = (r.json for r in fake_openai.requests)
    assert "tools" not in first or all(t["function"]["name"] != BROWSER for t in first["tools"])
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert "not available in this chat (capability mode 'safe-chat')" in result["content"]
    assert not ran
