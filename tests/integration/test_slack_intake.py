"""Slack hears of an event (HTTP 200) only once the adapter's sink has stored it.

The adapter runs alone with a sink standing in for the gateway's publish: the sink has the
message before the 200 comes back, and a sink that fails makes Slack retry (and the retry,
whose event id was seen, is taken).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.streaming import IncrementalRender, ReplyStreams
from core.envelopes import Inbound
from core.errors import BusError
from core.store.replies import MemoryReplyRecords
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack_helpers import MENU


class _Sink:
    """Stores what it is given; fails the first `failures` calls."""

    def __init__(self, failures: int = 0) -> None:
        self.stored: list[Inbound] = []
        self.failures = failures

    async def __call__(self, inbound: Inbound) -> None:
        if self.failures:
            self.failures -= 1
            raise BusError("the store is away")
        self.stored.append(inbound)


@asynccontextmanager
async def _listening(fake: FakeSlack, sink: _Sink) -> AsyncIterator[SlackAdapter]:
    adapter = SlackAdapter(
        SlackSettings(
            bot_token=SecretStr(fake.bot_token),
            signing_secret=SecretStr(fake.signing_secret),
            api_url=fake.api_url,
            host="127.0.0.1",
            port=0,
        ),
        menu=MENU,
        replies=ReplyStreams(MemoryReplyRecords(), IncrementalRender()),
    )
    running = asyncio.create_task(adapter.run(sink))
    try:
        await asyncio.wait_for(adapter.listening.wait(), 10)
        yield adapter
    finally:
        await adapter.stop()
        await running


def _url(adapter: SlackAdapter) -> str:
    return f"http://127.0.0.1:{adapter.port}/slack/events"


async def test_the_200_comes_after_the_message_is_stored(fake_slack: FakeSlack) -> None:
    sink = _Sink()
    async with _listening(fake_slack, sink) as adapter:
        status, _ = await fake_slack.post_event(_url(adapter), fake_slack.dm("keep me"))
        assert status == 200
        assert [inbound.text for inbound in sink.stored] == ["keep me"]


async def test_a_message_that_could_not_be_stored_is_refused_and_its_retry_taken(
    fake_slack: FakeSlack,
) -> None:
    sink = _Sink(failures=1)
    async with _listening(fake_slack, sink) as adapter:
        event = fake_slack.dm("try again")
        status, _ = await fake_slack.post_event(_url(adapter), event)
        assert status != 200
        assert sink.stored == []
        status, _ = await fake_slack.post_event(_url(adapter), event, retry_num=1)
        assert status == 200
        assert [inbound.text for inbound in sink.stored] == ["try again"]
