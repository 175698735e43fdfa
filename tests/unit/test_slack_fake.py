"""The Slack fake speaks Slack: the real slack_sdk and slack-bolt, used directly, accept it.

Nothing from Switchboard is used here; if one of these fails after a slack_sdk or slack-bolt
upgrade, the fake (not our channel code) needs fixing first.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes import FakeSlack
from tests.fakes.fixtures import fake_slack
from tests.fakes.slack_events import BOT_USER_ID, DM_CHANNEL, TEAM_ID

# The shared fixture, named here so this module also runs without the project conftest.
SHARED_FIXTURES = (fake_slack,)


@pytest.fixture
def client(fake_slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url)


async def test_auth_test_names_the_bot_and_refuses_other_tokens(
    fake_slack: FakeSlack, client: AsyncWebClient
) -> None:
    response = await client.auth_test()
    assert (response["team_id"], response["user_id"]) == (TEAM_ID, BOT_USER_ID)
    with pytest.raises(SlackApiError) as refused:
        await AsyncWebClient(token="xoxb-wrong", base_url=fake_slack.api_url).auth_test()
    assert refused.value.response["error"] == "invalid_auth"
    app_client = AsyncWebClient(token=fake_slack.app_token, base_url=fake_slack.api_url)
    with pytest.raises(SlackApiError) as wrong_type:
        await app_client.chat_postMessage(channel="C1", text="hi")
    assert wrong_type.value.response["error"] == "not_allowed_token_type"


async def test_messages_are_posted_updated_and_kept(
    fake_slack: FakeSlack, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(channel="C1", text="first", thread_ts="1.000001")
    await client.chat_update(channel="C1", ts=posted["ts"], text="second")
    [message] = fake_slack.sent("C1")
    assert (message.text, message.thread_ts, message.edits) == ("second", "1.000001", 1)
    with pytest.raises(SlackApiError) as missing:
        await client.chat_update(channel="C1", ts="9.000009", text="x")
    assert missing.value.response["error"] == "message_not_found"


async def test_a_429_carries_retry_after_and_the_retry_handler_waits_it_out(
    fake_slack: FakeSlack, client: AsyncWebClient
) -> None:
    fake_slack.fail_next("chat.postMessage", retry_after=3)
    with pytest.raises(SlackApiError) as limited:
        await client.chat_postMessage(channel="C1", text="hi")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "3"

    fake_slack.fail_next("chat.postMessage", retry_after=0)
    patient = AsyncWebClient(
        token=fake_slack.bot_token,
        base_url=fake_slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    await patient.chat_postMessage(channel="C1", text="after the wait")
    assert fake_slack.sent_texts("C1") == ["after the wait"]


async def test_reactions_and_assistant_status(
    fake_slack: FakeSlack, client: AsyncWebClient
) -> None:
    await client.reactions_add(channel="C1", timestamp="1.1", name="eyes")
    with pytest.raises(SlackApiError, match="already_reacted"):
        await client.reactions_add(channel="C1", timestamp="1.1", name="eyes")
    await client.reactions_remove(channel="C1", timestamp="1.1", name="eyes")
    with pytest.raises(SlackApiError, match="no_reaction"):
        await client.reactions_remove(channel="C1", timestamp="1.1", name="eyes")

    await client.assistant_threads_setStatus(channel_id="C1", thread_ts="1.1", status="busy")
    assert fake_slack.statuses == {("C1", "1.1"): "busy"}
    await client.chat_postMessage(channel="C1", thread_ts="1.1", text="done")
    assert fake_slack.statuses == {}
    fake_slack.assistant_error = "missing_scope"
    with pytest.raises(SlackApiError, match="missing_scope"):
        await client.assistant_threads_setStatus(channel_id="C1", thread_ts="1.1", status="x")


async def test_files_need_the_bot_token(fake_slack: FakeSlack) -> None:
    file = fake_slack.add_file("F1", b"\x89PNG...", mimetype="image/png")
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {fake_slack.bot_token}"}
        async with session.get(file["url_private"], headers=headers) as response:
            assert (response.content_type, await response.read()) == ("image/png", b"\x89PNG...")
        async with session.get(file["url_private_download"]) as response:
            assert response.content_type == "text/html"  # Slack's sign-in page
    assert fake_slack.downloads == [("F1", True), ("F1", False)]


async def test_events_are_signed_the_way_bolt_verifies_them(fake_slack: FakeSlack) -> None:
    body = json.dumps(fake_slack.dm("hello")).encode()
    now = str(int(time.time()))
    verifier = SignatureVerifier(fake_slack.signing_secret)
    assert verifier.is_valid(body, now, fake_slack.signature(now, body))
    assert not verifier.is_valid(body, now, fake_slack.signature(now, body, "other"))

    app = AsyncApp(
        signing_secret=fake_slack.signing_secret,
        client=AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url),
        process_before_response=True,
    )
    seen: list[dict[str, Any]] = []

    @app.event("message")
    async def remember(event: dict[str, Any]) -> None:
        seen.append(event)

    headers: dict[str, str | Sequence[str]] = {
        "x-slack-request-timestamp": now,
        "x-slack-signature": fake_slack.signature(now, body),
    }
    response = await app.async_dispatch(AsyncBoltRequest(body=body.decode(), headers=headers))
    assert response.status == 200
    assert [event["text"] for event in seen] == ["hello"]
    assert [c.method for c in fake_slack.calls] == ["auth.test"]  # bolt's own authorize


@pytest.fixture
async def socket_client(fake_slack: FakeSlack) -> AsyncIterator[SocketModeClient]:
    web = AsyncWebClient(base_url=fake_slack.api_url)
    client = SocketModeClient(app_token=fake_slack.app_token, web_client=web)
    yield client
    await client.close()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated
    tasks = [client.message_processor, client.current_session_monitor, client.message_receiver]
    await asyncio.wait([task for task in tasks if task is not None])


async def test_socket_mode_delivers_envelopes_and_records_acks(
    fake_slack: FakeSlack, socket_client: SocketModeClient
) -> None:
    received: list[SocketModeRequest] = []

    async def ack(client: Any, request: SocketModeRequest) -> None:
        received.append(request)
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    socket_client.socket_mode_request_listeners.append(ack)
    await socket_client.connect()  # type: ignore[no-untyped-call]  # slack_sdk leaves it unannotated
    await fake_slack.wait_socket_connected()
    envelope_id = await fake_slack.send_socket_event(
        fake_slack.dm("over the socket"), retry_attempt=1
    )
    await fake_slack.wait_for_ack(envelope_id)

    [request] = received
    assert request.type == "events_api"
    assert request.retry_attempt == 1
    assert request.payload["event"]["channel"] == DM_CHANNEL
    assert fake_slack.calls_to("apps.connections.open")[0].token == fake_slack.app_token
