"""The web page's HTTP API against a real worker, bus and SQLite store (no browser).

The server, the web channel's gateway and a worker run in the test's event loop with a scripted
model; requests go through aiohttp's client over a real socket.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bots.platforms import REGISTERED
from bots.profiles import load_profile
from bots.web import profile_budgets
from channels.web.api import ReadApi
from channels.web.costs import cost_report
from core.backends.sql.store import SqlStore
from core.bus.names import NOTIFICATIONS
from core.envelopes import Address, NotificationSent, NotificationSource
from core.heartbeat import ProcessInfo
from core.messages import ToolCall, Usage
from core.providers.base import ModelRequest
from core.providers.scripted import Reply, ScriptedProvider, ScriptStep, text_reply, tool_reply
from core.scheduling.book import ScheduleBook
from core.scheduling.models import OnceCadence, Schedule, ScheduleRun
from core.store.ledger import CostEntry
from core.watchdog import Watchdog, WatchdogSettings
from tests.integration.web_support import PATIENCE, TOKEN, Page, parse_sse, running_page


@pytest.fixture
async def script() -> list[ScriptStep]:
    """The model's answers, filled in by each test before it chats."""
    return []


@pytest.fixture
async def page(store: SqlStore, script: list[ScriptStep]) -> AsyncIterator[Page]:
    async def next_step(request: ModelRequest) -> Reply:
        step = script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if not callable(step):
            return step
        produced = step(request)
        return await produced if inspect.isawaitable(produced) else produced

    async with running_page(store, ScriptedProvider([next_step] * 10)) as running:
        yield running


async def test_without_the_token_every_route_is_401_and_shows_no_data(page: Page) -> None:
    paths = ("/api/sessions", "/api/costs", "/api/schedules", "/api/events", "/api/platforms", "/")
    for path in paths:
        async with page.http.get(page.base + path) as response:
            assert response.status == 401, path
            body = await response.text()
            assert "web:local" not in body
    async with page.http.get(
        page.base + "/api/sessions", headers={"Authorization": "Bearer wrong-token-0123456789"}
    ) as response:
        assert response.status == 401
    async with page.http.post(
        page.base + "/api/chat", json={"text": "hi"}, headers={"Origin": page.origin}
    ) as response:
        assert response.status == 401
    async with page.http.get(page.base + "/api/sessions", headers=page.bearer()) as response:
        assert response.status == 200
        assert (await response.json()) == {"sessions": []}


async def test_signing_in_sets_a_strict_http_only_cookie_and_needs_the_right_token(
    page: Page,
) -> None:
    async with page.http.get(page.base + "/login") as response:
        assert response.status == 200
        assert "Set-Cookie" not in response.headers  # no state change on GET
    async with page.http.post(
        page.base + "/login",
        data={"token": "not-the-token"},
        headers={"Origin": page.origin},
        allow_redirects=False,
    ) as response:
        assert response.status == 303
        assert response.headers["Location"] == "/login#failed"
        assert "Set-Cookie" not in response.headers
    async with page.http.post(
        page.base + "/login",
        data={"token": TOKEN},
        headers={"Origin": page.origin},
        allow_redirects=False,
    ) as response:
        assert response.status == 303
        cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert TOKEN not in cookie
    # The cookie (kept by the client's jar) now opens the API.
    async with page.http.get(page.base + "/api/schedules") as response:
        assert response.status == 200


async def test_writes_from_another_origin_are_refused(page: Page) -> None:
    body = {"prompt": "p", "deliver_to": "web:inbox", "every": "1h"}
    async with page.http.post(
        page.base + "/api/schedules",
        json=body,
        headers=page.bearer(Origin="http://evil.example"),
    ) as response:
        assert response.status == 403
    async with page.http.post(
        page.base + "/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"}
    ) as response:
        assert response.status == 403
    # Signed in with the cookie, a write must say where it comes from.
    async with page.http.post(
        page.base + "/login",
        data={"token": TOKEN},
        headers={"Origin": page.origin},
        allow_redirects=False,
    ) as response:
        assert response.status == 303
    async with page.http.post(page.base + "/api/schedules", json=body) as response:
        assert response.status == 403
    async with page.http.post(
        page.base + "/api/schedules", json=body, headers={"Origin": page.origin}
    ) as response:
        assert response.status == 201
    assert len(await page.store.list_schedules()) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/chat", "not json"),
        ("/api/chat", json.dumps(["a list"])),
        ("/api/chat", json.dumps({"text": ""})),
        ("/api/chat", json.dumps({"text": "hi", "conversation": "../etc"})),
        ("/api/chat", json.dumps({"text": "x" * 20_001})),
        ("/api/stop", json.dumps({})),
        ("/api/answer", json.dumps({"conversation": "c1", "answer": "maybe"})),
        ("/api/answer", json.dumps({"conversation": "c1", "answer": "yes", "question": 7})),
        ("/api/answer", json.dumps({"conversation": "c1", "answer": "yes", "question": "a:b"})),
        ("/api/answer", json.dumps({"conversation": "c1", "text": " "})),
        ("/api/answer", json.dumps({"conversation": "c1", "text": 7})),
        ("/api/schedules", json.dumps({"prompt": "p", "deliver_to": "web:inbox"})),
        ("/api/schedules", json.dumps({"prompt": "p", "deliver_to": "nowhere", "every": "1h"})),
        ("/api/schedules", json.dumps({"prompt": "p", "deliver_to": "web:x", "every": "soon"})),
        ("/api/schedules", json.dumps({"prompt": "", "deliver_to": "web:x", "every": "1h"})),
    ],
)
async def test_bad_bodies_are_400_with_a_reason(page: Page, path: str, body: str) -> None:
    async with page.http.post(
        page.base + path,
        data=body,
        headers=page.bearer(**{"Content-Type": "application/json"}),
    ) as response:
        assert response.status == 400
        assert (await response.json())["error"]


async def test_unknown_ids_are_404_and_bad_limits_400(page: Page) -> None:
    for method, path, status in (
        ("GET", "/api/sessions/nosuch", 404),
        ("GET", "/api/conversations/nosuch", 404),
        ("GET", "/api/schedules/nosuch/runs", 404),
        ("POST", "/api/schedules/nosuch/pause", 404),
        ("DELETE", "/api/schedules/nosuch", 404),
        ("GET", "/api/sessions?limit=abc", 400),
    ):
        async with page.http.request(method, page.base + path, headers=page.bearer()) as response:
            assert response.status == status, path
            assert (await response.json())["error"]


def _calculator_then_answer(request: ModelRequest) -> Reply:
    return text_reply("**391**, as the calculator said.", usage=Usage(input_tokens=80))


async def test_a_turn_streams_progress_and_the_reply_and_shows_in_events_and_costs(
    page: Page, script: list[ScriptStep]
) -> None:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "17*23"})
    script.extend([tool_reply(call), _calculator_then_answer])
    async with page.http.get(page.base + "/api/events", headers=page.bearer()) as live:
        ready = await live.content.readuntil(b"\n\n")
        assert b"event: ready" in ready
        events = await page.chat({"text": "what is 17*23?"})
        seen = b""
        async with asyncio.timeout(PATIENCE):
            while b"agent.run.complete" not in seen:
                seen += await live.content.readuntil(b"\n\n")

    kinds = [name for name, _ in events]
    assert kinds[0] == "conversation"
    assert "progress" in kinds
    assert kinds[-1] == "reply"
    reply = events[-1][1]
    assert reply["html"] == "<p><strong>391</strong>, as the calculator said.</p>\n"
    conversation = events[0][1]["conversation"]
    assert b"agent.run.start" in seen
    assert b"tool.request" in seen
    assert f'"chat": "{conversation}"'.encode() in seen

    async with page.http.get(page.base + "/api/costs", headers=page.bearer()) as response:
        costs = await response.json()
    [row] = costs["conversations"]
    assert row["key"] == f"web:local:{conversation}"
    assert row["calls"] == 2
    assert row["tokens"] == 80
    assert costs["models"] == [
        {"model": "test-model", "calls": 2, "cost_usd": 0.00008, "tokens": 80, "unpriced_calls": 0}
    ]
    assert len(costs["days"]) == 1

    async with page.http.get(page.base + "/api/conversations", headers=page.bearer()) as response:
        [listed] = (await response.json())["conversations"]
    assert (listed["conversation"], listed["title"]) == (conversation, "what is 17*23?")
    async with page.http.get(
        f"{page.base}/api/sessions/{listed['session']}", headers=page.bearer()
    ) as response:
        detail = await response.json()
    calls = [c for m in detail["messages"] for c in m["tool_calls"]]
    assert calls == [{"name": "calculator", "arguments": {"expression": "17*23"}}]
    assert any(m["role"] == "tool" and "391" in m["text"] for m in detail["messages"])
    assert detail["session"]["model"] is None  # the profile's default
    await page.store.set_session_model(listed["session"], "gpt-4.1")  # what /model keeps
    async with page.http.get(
        f"{page.base}/api/sessions/{listed['session']}", headers=page.bearer()
    ) as response:
        assert (await response.json())["session"]["model"] == "gpt-4.1"


async def test_model_markup_comes_back_escaped(page: Page, script: list[ScriptStep]) -> None:
    script.append(
        text_reply(
            '<script>alert(1)</script> <img src=x onerror="alert(2)"> [click](javascript:alert(3))'
        )
    )
    events = await page.chat({"text": "say something nasty", "conversation": "nasty"})
    html = events[-1][1]["html"]
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html  # an unsafe link stays text


async def test_stop_cancels_the_running_turn(page: Page, script: list[ScriptStep]) -> None:
    started = asyncio.Event()

    async def never_answers(request: ModelRequest) -> Reply:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("not reached")

    script.append(never_answers)
    chatting = asyncio.create_task(page.chat({"text": "take your time", "conversation": "slow"}))
    async with asyncio.timeout(PATIENCE):
        await started.wait()
    async with page.http.post(
        page.base + "/api/stop", json={"conversation": "slow"}, headers=page.bearer()
    ) as response:
        assert response.status == 202
    events = await asyncio.wait_for(chatting, PATIENCE)
    assert events[-1] == (
        "notice",
        {"kind": "notice", "text": "Cancelled.", "seq": events[-1][1]["seq"]},
    )


async def test_schedules_are_created_paused_resumed_listed_and_deleted(page: Page) -> None:
    headers = page.bearer()
    async with page.http.post(
        page.base + "/api/schedules",
        json={"prompt": "check the oven", "deliver_to": "web:kitchen", "every": "1h"},
        headers=headers,
    ) as response:
        assert response.status == 201
        made = (await response.json())["schedule"]
    assert made["cadence_text"]
    assert made["deliver_to_text"] == "web:kitchen"
    path = f"{page.base}/api/schedules/{made['id']}"
    async with page.http.post(path + "/pause", headers=headers) as response:
        assert (await response.json())["schedule"]["status"] == "paused"
    async with page.http.post(path + "/resume", headers=headers) as response:
        assert (await response.json())["schedule"]["status"] == "active"
    async with page.http.get(page.base + "/api/schedules", headers=headers) as response:
        [listed] = (await response.json())["schedules"]
    assert (listed["id"], listed["last_run"], listed["next_run_at"] is not None) == (
        made["id"],
        None,
        True,
    )
    async with page.http.get(path + "/runs", headers=headers) as response:
        assert (await response.json()) == {"runs": []}
    now = datetime.now(UTC)
    run = ScheduleRun(
        id="r1",
        schedule_id=made["id"],
        due_at=now,
        started_at=now,
        finished_at=now,
        status="succeeded",
        output="The oven is off.\n" * 50,
    )
    await page.store.save_run(run)
    async with page.http.get(path + "/runs", headers=headers) as response:
        [shown] = (await response.json())["runs"]
    assert shown["output"] == run.output  # the whole output, not a preview
    async with page.http.get(page.base + "/api/schedules", headers=headers) as response:
        [listed] = (await response.json())["schedules"]
    assert listed["last_run"]["status"] == "succeeded"
    async with page.http.delete(path, headers=headers) as response:
        assert response.status == 200
    async with page.http.get(page.base + "/api/schedules", headers=headers) as response:
        assert (await response.json()) == {"schedules": []}


async def test_a_finished_schedule_cannot_be_paused(page: Page) -> None:
    now = datetime.now(UTC)
    for status in ("completed", "disabled"):
        done = Schedule(
            id=f"s-{status}",
            cadence=OnceCadence(at=now - timedelta(hours=1)),
            prompt="take the bread out",
            deliver_to=Address(platform="web", bot="local", chat="kitchen"),
            owner="web:operator",
            status=status,
            next_run_at=None,
            created_at=now,
            updated_at=now,
        )
        await page.store.save_schedule(done)
        async with page.http.post(
            f"{page.base}/api/schedules/{done.id}/pause", headers=page.bearer()
        ) as response:
            assert response.status == 409
            assert "nothing to pause" in (await response.json())["error"]
        stored = await page.store.get_schedule(done.id)
        assert stored is not None and stored.status == status


async def test_a_store_that_does_not_answer_is_503_not_500(page: Page) -> None:
    await page.store.close()
    async with page.http.get(page.base + "/api/sessions", headers=page.bearer()) as response:
        assert response.status == 503
        assert "not answering" in (await response.json())["error"]


async def test_budgets_say_what_is_left_of_the_profiles_limits(
    store: SqlStore, tmp_path: Path
) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "profile.toml").write_text("max_spend_usd = 0.5\n")
    limits = profile_budgets(load_profile(tmp_path, "bot"))
    assert limits == {"per_session": 0.5}
    now = datetime.now(UTC)
    spends = (
        ("web:local:a", 0.1, now),
        ("web:local:b", 0.3, now - timedelta(days=2)),
        ("web:local:b", 0.05, now),
    )
    for key, cost, at in spends:
        session = await store.current_session(key)
        await store.record_cost(
            CostEntry(
                session_id=session.id,
                run_id="r",
                provider="p",
                model="m",
                usage=Usage(input_tokens=1),
                cost_usd=cost,
                at=at,
            )
        )
    api = ReadApi(
        store=store,
        book=ScheduleBook(store),
        addresses=REGISTERED.addresses(),
        budgets={**limits, "global_daily": 1.0, "per_chat_daily": 0.2},
    )
    shown = (await cost_report(store)).as_json(api.budgets)
    budgets = {b["name"]: b for b in shown["budgets"]}
    # per conversation: against the conversation that spent most (b: 0.35 in all)
    assert budgets["per_session"]["spent_usd"] == pytest.approx(0.35)
    assert budgets["per_session"]["left_usd"] == pytest.approx(0.15)
    # daily: against today's spend only (0.1 + 0.05), and the busiest chat today (a: 0.1)
    assert budgets["global_daily"]["spent_usd"] == pytest.approx(0.15)
    assert budgets["per_chat_daily"]["spent_usd"] == pytest.approx(0.1)
    assert [d["cost_usd"] for d in shown["days"]] == [pytest.approx(0.3), pytest.approx(0.15)]


async def test_calls_without_a_known_price_are_counted_per_day_and_model(page: Page) -> None:
    session = await page.store.current_session("web:local:kitchen")
    now = datetime.now(UTC)
    for model, cost in (("mystery-model", None), ("mystery-model", None), ("known", 0.5)):
        entry = CostEntry(
            session_id=session.id,
            run_id="r",
            provider="p",
            model=model,
            usage=Usage(input_tokens=10),
            cost_usd=cost,
            at=now,
        )
        await page.store.record_cost(entry)
    async with page.http.get(page.base + "/api/costs", headers=page.bearer()) as response:
        costs = await response.json()
    models = {m["model"]: (m["calls"], m["unpriced_calls"], m["cost_usd"]) for m in costs["models"]}
    assert models == {"mystery-model": (2, 2, 0.0), "known": (1, 0, 0.5)}
    [day] = costs["days"]
    assert (day["calls"], day["unpriced_calls"], day["cost_usd"]) == (3, 2, 0.5)
    assert costs["total"]["unpriced_calls"] == 2


async def test_a_notification_shows_in_the_live_feed_with_its_chat(page: Page) -> None:
    sent = NotificationSent(
        address=Address(platform="telegram", bot="default", chat="4242"),
        source=NotificationSource(kind="hook", name="ci"),
        text="deploy finished",
        status="delivered",
        platform_message_id="77",
    )
    async with page.http.get(page.base + "/api/events", headers=page.bearer()) as live:
        assert b"event: ready" in await live.content.readuntil(b"\n\n")
        await page.bus.publish(NOTIFICATIONS, sent)
        async with asyncio.timeout(PATIENCE):
            frame = await live.content.readuntil(b"\n\n")

    [(_, item)] = [
        (line, json.loads(line.removeprefix("data: ")))
        for line in frame.decode().splitlines()
        if line.startswith("data: ")
    ]
    assert (item["topic"], item["kind"]) == ("notifications", "notification.sent")
    assert (item["platform"], item["chat"]) == ("telegram", "4242")
    assert item["data"]["text"] == "deploy finished"
    assert item["data"]["source"] == {"kind": "hook", "name": "ci", "run_id": None}


class _Clock:
    """The watchdog's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_platforms_shows_each_process_s_watchdog_view_from_the_heartbeats(
    page: Page,
) -> None:
    async with page.http.get(page.base + "/api/platforms") as response:
        assert response.status == 401
    async with page.http.get(page.base + "/api/platforms", headers=page.bearer()) as response:
        assert response.status == 200
        assert (await response.json())["processes"] == []
    # A gateway's watchdog: telegram heard 2 minutes ago and delivered 30 s ago, one delivery of
    # four failed; slack with its last 5 deliveries failed.
    now = datetime.now(UTC)
    clock = _Clock(now - timedelta(seconds=120))
    dog = Watchdog(WatchdogSettings(silent_after=3600, failures=5), clock=clock)
    dog.received("telegram")
    dog.received("slack")
    clock.now = now - timedelta(seconds=30)
    for ok in (True, False, True, True):
        dog.delivered("telegram", ok=ok)
    for _ in range(5):
        dog.delivered("slack", ok=False)
    clock.now = now
    await dog.check()
    beat = ProcessInfo(
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
    await page.board.beat(beat)
    async with page.http.get(page.base + "/api/platforms", headers=page.bearer()) as response:
        assert response.status == 200
        body = await response.json()
    [process] = body["processes"]
    assert (process["id"], process["role"], process["detail"]) == (
        "gateway-1",
        "gateway",
        "telegram, slack",
    )
    assert process["missing"] is False
    shown = {p["platform"]: p for p in process["platforms"]}
    assert set(shown) == {"telegram", "slack"}
    telegram = shown["telegram"]
    assert (telegram["since_update"], telegram["since_delivery"]) == (120, 30)
    assert telegram["failure_rate"] == 0.25
    assert (telegram["incident"], telegram["problem"]) == (None, None)
    slack = shown["slack"]
    assert (slack["problem"], slack["incident"]) == ("failing", "its last 5 deliveries failed")


async def test_platforms_is_503_when_the_heartbeat_board_does_not_answer(page: Page) -> None:
    await page.board.aclose()
    async with page.http.get(page.base + "/api/platforms", headers=page.bearer()) as response:
        assert response.status == 503
        assert "not answering" in (await response.json())["error"]


async def test_a_typed_answer_reaches_the_ask_user_question_of_the_running_turn(
    store: SqlStore,
) -> None:
    """The page shows a question without an id as a text box; its answer is POSTed as `text`."""
    question = "Which colour should the logo be?"
    provider = ScriptedProvider(
        [
            tool_reply(ToolCall(id="a1", name="ask_user", arguments={"question": question})),
            text_reply("A blue logo it is."),
        ]
    )
    async with running_page(store, provider, ask_user=True) as page:
        body = {"text": "make me a logo", "conversation": "logo"}
        async with page.http.post(
            f"{page.base}/api/chat", json=body, headers=page.bearer()
        ) as response:
            assert response.status == 200
            seen = ""
            async with asyncio.timeout(PATIENCE):
                while "event: question" not in seen:
                    seen += (await response.content.readline()).decode()
                async with page.http.post(
                    f"{page.base}/api/answer",
                    json={"conversation": "logo", "text": " Blue "},
                    headers=page.bearer(),
                ) as answered:
                    assert answered.status == 202
                events = parse_sse(seen + await response.text())
    shown = [data for name, data in events if name == "question"]
    assert [(data["text"], "question" in data) for data in shown] == [(question, False)]
    assert events[-1][0] == "reply"
    assert events[-1][1]["text"] == "A blue logo it is."
    assert provider.requests[1].messages[-1].text.endswith("answered: Blue")
