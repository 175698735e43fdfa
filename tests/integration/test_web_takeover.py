"""The web page's takeover routes against a real worker, bus and SQLite store: take a
conversation's chat over, write in it as the operator (sent through the bot, kept as the
operator's), hand it back (the note kept); bad requests are 4xx."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.backends.sql.store import SqlStore
from core.messages import Message
from core.providers.scripted import ScriptedProvider, text_reply
from tests.integration.web_support import Page, running_page
from tests.workers import Outbox

KEY = "telegram:777:42"


@pytest.fixture
async def page(store: SqlStore) -> AsyncIterator[Page]:
    async with running_page(store, ScriptedProvider([text_reply("unused")])) as running:
        yield running


async def test_the_page_takes_a_chat_over_writes_in_it_and_hands_it_back(page: Page) -> None:
    await page.store.keep_message(KEY, "s42", Message.user("help?", source="t1"), finished="t1")
    route = f"{page.base}/api/sessions/s42"
    headers = page.bearer()

    async with page.http.get(f"{route}/takeover", headers=headers) as response:
        assert response.status == 200
        assert await response.json() == {"chat": "telegram:42", "takeover": None}
    async with page.http.post(f"{route}/say", json={"text": "hi"}, headers=headers) as refused:
        assert refused.status == 409
    async with page.http.post(f"{route}/takeover", json={"for": "soon"}, headers=headers) as bad:
        assert bad.status == 400
        assert "soon" in (await bad.json())["error"]

    async with page.http.post(f"{route}/takeover", json={"for": "1h"}, headers=headers) as took:
        assert took.status == 200
        assert (await took.json())["takeover"]["by"] == "web"
    async with page.http.post(
        f"{route}/say", json={"text": "Bob from the page here."}, headers=headers
    ) as sent:
        assert sent.status == 200, await sent.text()
    delivery = await Outbox(page.bus, "telegram").until("Bob from the page here.")
    assert delivery.kind == "notification" and delivery.address.chat == "42"
    async with page.http.get(route, headers=headers) as shown:
        messages = (await shown.json())["messages"]
    assert [(m["role"], m.get("speaker"), m["text"]) for m in messages] == [
        ("user", None, "help?"),
        ("assistant", "operator", "Bob from the page here."),
    ]

    async with page.http.post(f"{route}/handback", headers=headers) as back:
        assert back.status == 200
        assert (await back.json())["ended"]["chat"] == "telegram:42"
    stored = await page.store.list_messages("s42")
    assert stored[-1].speaker == "switchboard"
    assert "answered in this chat" in stored[-1].text
    async with page.http.get(f"{route}/takeover", headers=headers) as after:
        assert (await after.json())["takeover"] is None


async def test_sessions_of_no_chat_and_unknown_ones_are_4xx(page: Page) -> None:
    made = await page.store.current_session("notify:cli", new_id="n1")
    headers = page.bearer()
    async with page.http.post(
        f"{page.base}/api/sessions/{made.id}/takeover", headers=headers
    ) as response:
        assert response.status == 400
    async with page.http.post(f"{page.base}/api/sessions/nope/takeover", headers=headers) as gone:
        assert gone.status == 404
    async with page.http.post(
        f"{page.base}/api/sessions/{made.id}/say", data=b"[1]", headers=headers
    ) as bad:
        assert bad.status == 400
