"""Webhook endpoints answer garbage with a 4xx, never a 500, and keep the log short.

Anyone who finds the port can post anything: unsigned junk, a timestamp that is not a number,
a correctly signed JSON array, a body of the wrong type. Each is refused before anything that
could raise, with at most one WARNING line (and only so many a minute), never a traceback; the
bot goes on answering real messages.
"""

from __future__ import annotations

import io
import json
import logging
import time

import aiohttp
import pytest
from pydantic import SecretStr

from core.backends.sql.store import SqlStore
from core.providers.scripted import ScriptedProvider, text_reply
from tests.fakes import FakeSlack, FakeTelegram
from tests.fakes.slack_events import DM_CHANNEL
from tests.fakes.telegram_api import SECRET_HEADER
from tests.integration import slack_helpers, telegram_helpers

SECRET = "s3cret-webhook-token"
ROUNDS = 40  # each kind of garbage this many times: enough to show the log is bounded


async def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=io.BytesIO(body), headers=headers) as response,
    ):
        return response.status


def scripted(answer: str) -> ScriptedProvider:
    return ScriptedProvider([text_reply(answer)])


def assert_quiet(caplog: pytest.LogCaptureFixture, requests: int) -> None:
    """No ERROR, no traceback, and far fewer WARNING lines than refused requests."""
    records = caplog.records
    assert not [r for r in records if r.levelno >= logging.ERROR], [r.message for r in records]
    assert not [r for r in records if r.exc_info], "a refused request logged a traceback"
    refusals = [r for r in records if "refused a request" in r.getMessage()]
    assert 1 <= len(refusals) <= 10 < requests


async def test_the_telegram_webhook_refuses_garbage_with_4xx(
    fake_telegram: FakeTelegram, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_telegram
    caplog.set_level(logging.WARNING)
    headers = {"Content-Type": "application/json", SECRET_HEADER: SECRET}
    garbage: list[tuple[bytes, dict[str, str], int]] = [
        (b"[1, 2, 3]", headers, 400),
        (b'"a string"', headers, 400),
        (b"null", headers, 400),
        (b'{"update_id": "one"}', headers, 400),
        (b'{"update_id": 5, "message": "not a message"}', headers, 400),
        (b"\xff\xfe not utf-8", headers, 400),
        (b'{"update_id": 1, "message": {', headers, 400),
        (b"{}", {"Content-Type": "application/json"}, 403),
        (b"x" * (1024 * 1024 + 1), headers, 413),
    ]
    async with telegram_helpers.serving(
        fake,
        store,
        scripted("still answering"),
        webhook_url="http://127.0.0.1/tg-hook",
        webhook_secret=SecretStr(SECRET),
        webhook_host="127.0.0.1",
        webhook_port=0,
    ) as bot:
        url = f"http://127.0.0.1:{bot.adapter.webhook_port}/tg-hook"
        statuses = [
            (await post(url, body, sent_headers), expected)
            for _ in range(ROUNDS)
            for body, sent_headers, expected in garbage
        ]
        update = fake.private_text(555, "a real message after the garbage")
        assert await fake.post_webhook(url, update, secret=SECRET) == 200
        await telegram_helpers.reply_containing(fake, 555, "still answering")

    assert [got for got, _ in statuses] == [expected for _, expected in statuses]
    assert_quiet(caplog, len(statuses))


async def test_the_slack_events_endpoint_refuses_garbage_with_4xx(
    fake_slack: FakeSlack, store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_slack
    caplog.set_level(logging.WARNING)

    def signed(body: bytes, content_type: str = "application/json") -> dict[str, str]:
        stamp = str(int(time.time()))
        return {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": fake.signature(stamp, body),
        }

    array = json.dumps([{"type": "event_callback"}]).encode()
    not_utf8 = b"\xff\xfe{}"
    garbage: list[tuple[bytes, dict[str, str], int]] = [
        (b"{not json", {"Content-Type": "application/json"}, 401),
        (b"{}", {"Content-Type": "application/json", "X-Slack-Request-Timestamp": "soon"}, 401),
        (b"{}", {**signed(b"{}"), "X-Slack-Request-Timestamp": "1e9"}, 401),
        (array, signed(array), 400),
        (b"{not json", signed(b"{not json"), 400),
        (not_utf8, signed(not_utf8), 400),
        (b"x" * (1024 * 1024 + 1), signed(b"x"), 413),
    ]
    async with slack_helpers.serving(fake, store, scripted("still answering")) as bot:
        url = bot.events_url
        statuses = [
            (await post(url, body, sent_headers), expected)
            for _ in range(ROUNDS)
            for body, sent_headers, expected in garbage
        ]
        await bot.send(fake.dm("a real message after the garbage"))
        await slack_helpers.reply_containing(fake, DM_CHANNEL, "still answering")

    assert [got for got, _ in statuses] == [expected for _, expected in statuses]
    assert_quiet(caplog, len(statuses))
