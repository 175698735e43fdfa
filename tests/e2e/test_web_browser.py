"""The web page in a real browser: Debian's chromium, driven by Playwright (never downloaded).

The page runs in the test's event loop over a real worker, bus and SQLite store (see
`tests/integration/web_support.py`) with a model the test holds back mid-answer, so the test
sees an answer stream in. A screenshot of each tab is saved under the test's tmp folder.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Locator, Page, async_playwright, expect
from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.bus.names import EVENTS
from core.envelopes import Address, Attachment, EventEnvelope
from core.events import Finished, ModelEvent, TextDelta
from core.heartbeat import ProcessInfo, SqliteHeartbeats
from core.messages import Message, ToolCall, Usage
from core.providers.base import ModelRequest
from core.providers.scripted import ScriptedProvider, text_reply, tool_reply
from core.scheduling.models import IntervalCadence, OnceCadence, Schedule
from core.store.ledger import CostEntry
from core.takeover import Takeovers
from core.tools import FileDrop
from core.tools.base import SafetyTier, Tool, ToolContext
from core.watchdog import Watchdog, WatchdogSettings
from tests.backends.memory_bus import MemoryBus
from tests.integration.web_support import PATIENCE, running_page
from tests.workers import Outbox

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
NASTY = '<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> done'
MS = int(PATIENCE * 1000)
# Assertions wait as long as page actions do (Playwright's own default is 5 s): two busy CPU
# cores shared by several test runs make a browser slow.
expect.set_options(timeout=MS)


class HeldModel:
    """Answers by the last user message; the arithmetic answer waits for `release` midway."""

    def __init__(self) -> None:
        self.halfway = asyncio.Event()
        self.release = asyncio.Event()

    @property
    def name(self) -> str:
        return "held"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        asked = next(m.text for m in reversed(request.messages) if m.role == "user")
        after_tool = request.messages[-1].role == "tool"
        usage = Usage(input_tokens=800, output_tokens=200)
        if "17*23" in asked and not after_tool:
            yield ToolCall(id="c1", name="calculator", arguments={"expression": "17*23"})
            yield Finished(stop_reason="tool_use", usage=usage)
        elif "17*23" in asked:
            yield TextDelta(text="The answer is being worked out: ")
            self.halfway.set()
            await self.release.wait()
            yield TextDelta(text="**391**.")
            yield Finished(stop_reason="end_turn", usage=usage)
        elif "think first" in asked:
            self.halfway.set()
            await self.release.wait()
            yield TextDelta(text="Thought it through.")
            yield Finished(stop_reason="end_turn", usage=usage)
        elif "take your time" in asked:
            self.halfway.set()
            await asyncio.Event().wait()  # only the stop button ends this one
        elif "launch" in asked and not after_tool:
            yield ToolCall(id="c2", name="launch", arguments={})
            yield Finished(stop_reason="tool_use", usage=usage)
        else:
            text = "Launched." if after_tool else asked
            yield TextDelta(text=text)
            yield Finished(stop_reason="end_turn", usage=usage)


class _NoArgs(BaseModel):
    pass


async def _launch(_args: _NoArgs, _context: ToolContext) -> str:
    return "launched"


LAUNCH = Tool(
    name="launch",
    description="Launch the rocket (asks first).",
    args=_NoArgs,
    tier=SafetyTier.PRIVILEGED,
    run=_launch,
)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not HAVE_CHROMIUM:
        pytest.fail("chromium is not installed: apt-get install chromium (`make test-deps` does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            await launched.close()


async def _signed_in(browser: Browser, base: str, token: str) -> Page:
    page = await browser.new_page(viewport={"width": 1200, "height": 800})
    page.set_default_timeout(MS)
    await page.goto(f"{base}/login#token={token}")
    await page.wait_for_url(f"{base}/")
    return page


async def test_the_page_chats_streams_shows_events_schedules_sessions_and_costs(
    browser: Browser, store: SqlStore, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    model = HeldModel()
    async with running_page(store, model, extra_tools=(LAUNCH,)) as running:
        # Without the token the page shows only the sign-in form.
        anonymous = await browser.new_page()
        response = await anonymous.goto(running.base + "/")
        assert response is not None and response.status == 401
        await expect(anonymous.locator("#login-form")).to_be_visible()
        await anonymous.close()

        page = await _signed_in(browser, running.base, running.server.auth.token)
        await expect(page.locator("body")).to_have_attribute("data-events", "live")

        # Chat: the answer streams in (shown while the model is held), then completes.
        await page.fill("#chat-input", "what is 17*23?")
        await page.click("#send")
        await page.locator(".message.progress", has_text="calculator").wait_for()
        await asyncio.wait_for(model.halfway.wait(), PATIENCE)
        streaming = page.locator(".message.assistant.streaming")
        await expect(streaming).to_contain_text("The answer is being worked out")
        await expect(page.locator("#stop")).to_be_enabled()
        await page.screenshot(path=shots / "chat-streaming.png")
        model.release.set()
        answer = page.locator(".message.assistant.done")
        await expect(answer).to_contain_text("The answer is being worked out: 391.")
        await expect(answer.locator("strong")).to_have_text("391")
        await page.screenshot(path=shots / "chat.png")

        # A privileged tool asks first: the question comes with buttons.
        lifecycle = await running.bus.subscribe(EVENTS)
        await page.fill("#chat-input", "launch it")
        await page.click("#send")
        await page.click(".message.question .answer-yes")
        await expect(page.locator(".message.assistant.done").last).to_have_text("Launched.")
        await expect(page.locator(".message.question").last).to_contain_text("Allowed")
        # Answered as a press of that question's button (its id sent back), not a typed yes.
        async with asyncio.timeout(PATIENCE):
            async for event in lifecycle:
                if isinstance(event, EventEnvelope) and event.name == "confirm.decision":
                    assert (event.data["via"], event.data["allowed"]) == ("button", True)
                    break
        await lifecycle.aclose()

        # The stop button cancels a turn that would never end.
        await page.fill("#chat-input", "take your time")
        await page.click("#send")
        await page.click("#stop")
        await expect(page.locator(".message.notice").last).to_have_text("Cancelled.")
        await expect(page.locator("#send")).to_be_enabled()

        # Events: the turns' lifecycle arrived live, and the filters narrow them.
        await page.click("button[data-tab=events]")
        rows = page.locator("#events tbody tr")
        await expect(rows.filter(has_text="agent.run.complete")).to_have_count(2)
        await expect(rows.filter(has_text="agent.run.cancelled")).to_have_count(1)
        await expect(rows.filter(has_text="tool.request").first).to_be_visible()
        await page.fill("#filter-kind", "tool.result")
        await expect(page.locator("#events tbody tr:visible")).to_have_count(2)
        await page.fill("#filter-platform", "telegram")
        await expect(page.locator("#events tbody tr:visible")).to_have_count(0)
        await page.fill("#filter-platform", "web")
        await page.fill("#filter-kind", "")
        await expect(page.locator("#events tbody tr:visible")).to_have_count(await rows.count())
        await page.screenshot(path=shots / "events.png")

        # Schedules: create one, see it listed with its next run, delete it.
        await page.click("button[data-tab=schedules]")
        await page.fill("#schedule-prompt", "check the oven")
        await page.select_option("#schedule-kind", "every")
        await page.fill("#schedule-when", "1h")
        await page.fill("#schedule-to", "web:kitchen")
        await page.click("#schedule-create")
        row = page.locator("#schedules tbody tr", has_text="check the oven")
        await expect(row).to_contain_text("web:kitchen")
        await expect(row).to_contain_text("active")
        await page.screenshot(path=shots / "schedules.png")
        await row.get_by_role("button", name="Pause").click()
        await expect(row).to_contain_text("paused")
        await row.get_by_role("button", name="Resume").click()
        await expect(row).to_contain_text("active")
        await row.locator("button.delete").click()
        await expect(page.locator("#schedules tbody tr")).to_have_count(0)
        assert await store.list_schedules() == []

        # Sessions: the conversation with its tool call.
        await page.click("button[data-tab=sessions]")
        await page.locator("#sessions tbody tr", has_text="web:local:").first.click()
        await expect(page.locator("#session-detail code.tool-call").first).to_be_visible()
        await page.screenshot(path=shots / "sessions.png")

        # Costs: the turns' cost per conversation, per model, and the day's bar.
        await page.click("button[data-tab=costs]")
        await expect(page.locator("#cost-total")).to_contain_text("model calls")
        conversation = page.locator("#cost-conversations tbody tr", has_text="web:local:")
        session_id = await conversation.get_attribute("data-session")
        assert session_id is not None
        charged = await store.cost_summary(session_id)
        assert charged.cost_usd > 0.004  # four answered calls; the cancelled one is estimated
        await expect(conversation).to_contain_text(f"${charged.cost_usd:.4f}")
        await expect(page.locator("#cost-models tbody tr")).to_contain_text("test-model")
        await expect(page.locator("#cost-chart svg rect.bar")).to_have_count(1)
        await page.screenshot(path=shots / "costs.png")

        # New conversation, and the earlier one reopened from the list.
        await page.click("button[data-tab=chat]")
        await page.click("#new-conversation")
        await expect(page.locator("#messages .message")).to_have_count(0)
        await page.locator("#conversations a").first.click()
        await expect(page.locator("#messages .message.assistant").first).to_contain_text("391")
    assert sorted(p.name for p in shots.iterdir()) == [
        "chat-streaming.png",
        "chat.png",
        "costs.png",
        "events.png",
        "schedules.png",
        "sessions.png",
    ]


async def test_model_markup_is_shown_as_text(
    browser: Browser, store: SqlStore, tmp_path: Path
) -> None:
    async with running_page(store, HeldModel()) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.fill("#chat-input", NASTY)
        await page.click("#send")
        answer = page.locator(".message.assistant.done")
        await expect(answer).to_contain_text("<script>window.pwned = 1</script>")
        await expect(answer).to_contain_text('<img src=x onerror="window.pwned = 2">')
        assert await answer.locator("script, img").count() == 0
        assert await page.locator("#messages img, #messages script").count() == 0
        assert await page.evaluate("window.pwned === undefined")
        await page.screenshot(path=tmp_path / "markup.png")


async def test_the_right_link_pasted_after_a_wrong_one_signs_in(
    browser: Browser, store: SqlStore
) -> None:
    async with running_page(store, HeldModel()) as running:
        page = await browser.new_page()
        page.set_default_timeout(MS)
        await page.goto(f"{running.base}/login#token=stale-token-0123456789")
        await expect(page.locator("#login-failed")).to_be_visible()
        # Pasted into the same tab: only the part after '#' changes, nothing is loaded.
        await page.goto(f"{running.base}/login#token={running.server.auth.token}")
        await page.wait_for_url(f"{running.base}/")
        await expect(page.locator("body")).to_have_attribute("data-events", "live")


async def test_costs_without_a_known_price_show_unknown_not_free(
    browser: Browser, store: SqlStore
) -> None:
    session = await store.current_session("web:local:kitchen")
    for model, cost in (("mystery-model", None), ("known-model", 0.25)):
        entry = CostEntry(
            session_id=session.id,
            run_id="r",
            provider="p",
            model=model,
            usage=Usage(input_tokens=1000),
            cost_usd=cost,
            at=datetime.now(UTC),
        )
        await store.record_cost(entry)
    async with running_page(store, HeldModel()) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.click("button[data-tab=costs]")
        mystery = page.locator("#cost-models tbody tr", has_text="mystery-model")
        await expect(mystery.locator("td").last).to_have_text("unknown")
        known = page.locator("#cost-models tbody tr", has_text="known-model")
        await expect(known.locator("td").last).to_have_text("$0.2500")
        # Sums with some unknown calls say so: the known part plus an unknown rest.
        await expect(page.locator("#cost-total")).to_contain_text("$0.2500 + unknown")
        conversation = page.locator("#cost-conversations tbody tr", has_text="web:local:kitchen")
        await expect(conversation.locator("td").last).to_have_text("$0.2500 + unknown")
        await expect(page.locator("#cost-chart svg")).to_contain_text("$0.2500 + unknown")


async def test_finished_schedules_offer_no_pause(browser: Browser, store: SqlStore) -> None:
    now = datetime.now(UTC)
    once = OnceCadence(at=now - timedelta(hours=1))
    hourly = IntervalCadence(seconds=3600, start=now - timedelta(hours=5))
    made = {
        "ran-once": (once, "completed"),
        "missed-once": (once, "disabled"),
        "kept-failing": (hourly, "disabled"),
        "hourly": (hourly, "active"),
    }
    for name, (cadence, status) in made.items():
        await store.save_schedule(
            Schedule(
                id=name,
                cadence=cadence,
                prompt=f"prompt of {name}",
                deliver_to=Address(platform="web", bot="local", chat="kitchen"),
                owner="web:operator",
                status=status,
                next_run_at=now + timedelta(hours=1) if status == "active" else None,
                created_at=now,
                updated_at=now,
            )
        )
    async with running_page(store, HeldModel()) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.click("button[data-tab=schedules]")

        def buttons(name: str) -> Locator:
            return page.locator(f"#schedules tbody tr[data-schedule={name}] button")

        await expect(buttons("hourly")).to_have_text(["Pause", "Runs", "Delete"])
        await expect(buttons("kept-failing")).to_have_text(["Resume", "Runs", "Delete"])
        await expect(buttons("ran-once")).to_have_text(["Runs", "Delete"])
        await expect(buttons("missed-once")).to_have_text(["Runs", "Delete"])


async def _beat_a_gateway(board: SqliteHeartbeats) -> None:
    """A gateway's beat through the real board: its watchdog heard telegram 2 minutes ago, saw
    one of its four deliveries fail 30 s ago, and has slack failing (5 deliveries in a row)."""
    now = datetime.now(UTC)
    moments = iter((now - timedelta(seconds=120), now - timedelta(seconds=30), now))
    current = next(moments)
    dog = Watchdog(WatchdogSettings(silent_after=3600, failures=5), clock=lambda: current)
    dog.received("telegram")
    current = next(moments)
    for ok in (True, False, True, True):
        dog.delivered("telegram", ok=ok)
    for _ in range(5):
        dog.delivered("slack", ok=False)
    current = next(moments)
    await dog.check()
    await board.beat(
        ProcessInfo(
            id="gateway-1",
            role="gateway",
            host="box",
            pid=42,
            version="1.0",
            started_at=now - timedelta(hours=1),
            seen_at=now,
            detail="telegram, slack",
            platforms=dog.health(now),
        )
    )


async def test_the_platforms_view_shows_each_platform_s_figures_and_incident(
    browser: Browser, store: SqlStore, tmp_path: Path
) -> None:
    async with running_page(store, HeldModel()) as running:
        await _beat_a_gateway(running.board)
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.click("button[data-tab=platforms]")
        telegram = page.locator("#platforms tbody tr[data-platform=telegram] td")
        # Ages are counted on to now from the beat: a second may pass before the page shows.
        await expect(telegram).to_have_text(
            [
                "gateway telegram, slack (box:42)",
                "telegram",
                "ok",
                "2 min ago",
                re.compile(r"^[3-9]\d s ago$"),
                "not polled",
                "25 %",
            ]
        )
        slack = page.locator("#platforms tbody tr[data-platform=slack] td")
        await expect(slack.nth(2)).to_have_text("FAILING: its last 5 deliveries failed")
        await expect(slack.nth(3)).to_have_text("never")
        await expect(slack.nth(6)).to_have_text("100 %")
        await page.screenshot(path=tmp_path / "screenshots" / "platforms.png")


# axe-core rules the page once broke: text contrast, the chart's text alternative, the main
# landmark and the level-one heading, an empty table header.
A11Y_RULES = (
    "color-contrast",
    "svg-img-alt",
    "landmark-one-main",
    "page-has-heading-one",
    "empty-table-header",
)


async def _axe(page: Page, where: str) -> set[str]:
    """Run axe-core on `page`; fail on any violation; the ids of the rules that held."""
    results = (await Axe().run(page, options={"resultTypes": ["violations"]})).response
    found = [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']]}"
        for v in results["violations"]
    ]
    assert found == [], f"{where}: {found}"
    return {rule["id"] for rule in results["passes"]}


async def test_every_view_passes_axe_core(browser: Browser, store: SqlStore) -> None:
    session = await store.current_session("web:local:kitchen")
    entry = CostEntry(
        session_id=session.id,
        run_id="r",
        provider="p",
        model="test-model",
        usage=Usage(input_tokens=1000),
        cost_usd=0.25,
        at=datetime.now(UTC),
    )
    await store.record_cost(entry)
    async with running_page(store, HeldModel()) as running:
        await _beat_a_gateway(running.board)
        login = await browser.new_page()
        await login.goto(f"{running.base}/login")
        await _axe(login, "sign-in")
        await login.close()

        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.fill("#chat-input", "launch nothing, just say hello")
        await page.click("#send")
        await expect(page.locator(".message.assistant.done")).to_be_visible()
        held = await _axe(page, "chat")
        for tab, ready in (
            ("events", "#events tbody tr"),
            ("schedules", "#schedules thead th"),
            ("sessions", "#sessions tbody tr"),
            ("costs", "#cost-chart svg"),
            ("platforms", "#platforms td.incident"),
        ):
            await page.click(f"button[data-tab={tab}]")
            await page.locator(ready).first.wait_for()
            held |= await _axe(page, tab)
        assert set(A11Y_RULES) <= held
        await expect(page.locator("#cost-chart svg")).to_have_attribute(
            "aria-label", re.compile(r"Tokens and cost per day: \d{4}-\d\d-\d\d, \d+ tokens, \$")
        )


async def test_a_thinking_sign_shows_until_the_answer_starts(
    browser: Browser, store: SqlStore
) -> None:
    model = HeldModel()
    async with running_page(store, model) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.fill("#chat-input", "think first, then answer")
        await page.click("#send")
        # The model has the question and has said nothing yet: the page shows it works.
        await asyncio.wait_for(model.halfway.wait(), PATIENCE)
        sign = page.locator("#messages .thinking")
        await expect(sign).to_be_visible()
        await expect(sign).to_have_text("Thinking…")
        await expect(sign).to_have_attribute("role", "status")
        model.release.set()
        await expect(page.locator(".message.assistant.done")).to_have_text("Thought it through.")
        await expect(sign).to_have_count(0)


async def test_at_phone_width_the_chat_keeps_its_width_and_nothing_overlaps(
    browser: Browser, store: SqlStore, tmp_path: Path
) -> None:
    async with running_page(store, HeldModel()) as running:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        page.set_default_timeout(MS)
        await page.goto(f"{running.base}/login#token={running.server.auth.token}")
        await page.wait_for_url(f"{running.base}/")
        await page.fill("#chat-input", "a message long enough to wrap over a few lines of a phone")
        await page.click("#send")
        await expect(page.locator(".message.assistant.done")).to_be_visible()
        await page.screenshot(path=tmp_path / "phone-chat.png")
        messages = await page.locator("#messages").bounding_box()
        sidebar = await page.locator("#tab-chat aside").bounding_box()
        assert messages is not None and sidebar is not None
        assert messages["width"] > 250, messages
        # The list of conversations sits above the chat, not beside or over it.
        assert sidebar["y"] + sidebar["height"] <= messages["y"], (sidebar, messages)
        # A sentence wraps over a few lines, not one word per line.
        bubble = await page.locator(".message.user").bounding_box()
        assert bubble is not None and bubble["height"] < 100, bubble
        # No view is wider than the phone (wide tables scroll inside their panel).
        for tab in ("chat", "events", "schedules", "sessions", "costs"):
            await page.click(f"button[data-tab={tab}]")
            wide = await page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, (tab, wide)


class _FileModel:
    """Asks for the `hand_over` tool once, then says it is done."""

    @property
    def name(self) -> str:
        return "files"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.messages[-1].role == "tool":
            yield TextDelta(text="Here it is.")
        else:
            yield ToolCall(id="f1", name="hand_over", arguments={})
        yield Finished(stop_reason="end_turn", usage=Usage(input_tokens=10, output_tokens=5))


async def test_a_file_the_bot_sends_is_offered_as_a_download(
    browser: Browser, store: SqlStore, tmp_path: Path
) -> None:
    drop = FileDrop(MemoryBus())  # the page's own bus once it runs

    async def hand_over(_args: _NoArgs, context: ToolContext) -> str:
        notes = Attachment(name="notes.txt", media_type="text/plain", data=b"milk, eggs")
        await drop.send(context, notes, caption="The list")
        return "sent notes.txt"

    tool = Tool(
        name="hand_over", description="x", args=_NoArgs, tier=SafetyTier.READ_ONLY, run=hand_over
    )
    async with running_page(store, _FileModel(), extra_tools=(tool,)) as running:
        unused, drop.bus = drop.bus, running.bus
        await unused.close()
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.fill("#chat-input", "the shopping list please")
        await page.click("#send")
        link = page.locator(".message.file a")
        await expect(link).to_have_text("notes.txt")
        await expect(page.locator(".message.file")).to_contain_text("The list")
        assert await link.get_attribute("download") == "notes.txt"
        async with page.expect_download() as waiting:
            await link.click()
        download = await waiting.value
        saved = tmp_path / "downloaded.txt"
        await download.save_as(saved)
        assert saved.read_bytes() == b"milk, eggs"
        await expect(page.locator(".message.assistant.done")).to_contain_text("Here it is.")
        await page.screenshot(path=tmp_path / "file.png")


async def test_a_chat_is_taken_over_answered_and_handed_back_from_the_session_view(
    browser: Browser, store: SqlStore
) -> None:
    key = "telegram:777:42"
    await store.keep_message(key, "s42", Message.user("help?", source="t1"), finished="t1")
    async with running_page(store, HeldModel()) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.click("button[data-tab=sessions]")
        await page.locator("#sessions tbody tr", has_text=key).click()
        await expect(page.locator("#takeover-status")).to_contain_text(
            "The bot answers in telegram:42"
        )
        await page.click("#take-over")
        await expect(page.locator("#takeover-status")).to_contain_text("You answer in telegram:42")
        assert [found.by for found in await Takeovers(store).running()] == ["web"]

        # A person's message kept meanwhile shows without anything clicked.
        await store.keep_message(
            key, "s42", Message.user("is anyone there?", source="t2"), finished="t2"
        )
        await expect(page.locator("#session-detail .message.user").last).to_contain_text(
            "is anyone there?"
        )
        await page.fill("#takeover-text", "Bob from support here.")
        await page.click("#takeover-send")
        await expect(page.locator("#session-detail .message.operator")).to_contain_text(
            "Bob from support here."
        )
        sent = await Outbox(running.bus, "telegram").until("Bob from support here.")
        assert sent.kind == "notification" and sent.address.chat == "42"

        await page.click("#hand-back")
        await expect(page.locator("#takeover-status")).to_contain_text("The bot answers")
        await expect(page.locator("#session-detail .message.switchboard")).to_contain_text(
            "answered in this chat"
        )
    assert await Takeovers(store).running() == []


async def test_an_ask_user_question_is_answered_in_its_text_box(
    browser: Browser, store: SqlStore
) -> None:
    question = "Which colour should the logo be?"
    model = ScriptedProvider(
        [
            tool_reply(ToolCall(id="a1", name="ask_user", arguments={"question": question})),
            text_reply("A blue logo it is."),
        ]
    )
    async with running_page(store, model, ask_user=True) as running:
        page = await _signed_in(browser, running.base, running.server.auth.token)
        await page.fill("#chat-input", "make me a logo")
        await page.click("#send")
        asked = page.locator(".message.question").last
        await expect(asked).to_contain_text(question)
        assert await asked.locator(".answer-yes").count() == 0  # no yes/no buttons
        await asked.locator(".answer-text").fill("Blue")
        await asked.locator(".answer-send").click()
        await expect(page.locator(".message.assistant.done").last).to_have_text(
            "A blue logo it is."
        )
    assert model.requests[1].messages[-1].text.endswith("answered: Blue")
