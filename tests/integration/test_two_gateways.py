"""Two gateways of one platform on one Redis bus: every streamed reply arrives whole and once.

The platforms that allow replicas (Slack over the Events API, Telegram by webhook) run two real
adapters, each with its own `RedisBus` connection and reply records (one SQL database, each
gateway its own connection to it and to Redis for the holds), against the platform fake; one
worker streams every model piece at once (pacing 0), so the pieces of one reply are spread over
both gateways. A scripted model answers each question with a streamed answer of several pieces,
some long enough for two or more platform messages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from pydantic import SecretStr

from bots.platforms import command_registry
from channels.base import ChannelAdapter, InboundSink
from channels.gateway import Gateway
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.slack.format import SLACK_LIMIT, slack_chunks
from channels.streaming import IncrementalRender, ReplyStreams, ReplyTarget
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from channels.telegram.format import TELEGRAM_LIMIT, telegram_chunks
from core.backends.redis.bus import RedisBus
from core.backends.redis.client import connect_redis
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.redis.replies_hold import RedisReplyHolds
from core.backends.sql.store import SqlReplyRecords, SqlStore, sqlite_url
from core.envelopes import Outbound
from core.events import Finished, ModelEvent, TextDelta
from core.providers.base import ModelRequest
from core.providers.scripted import ScriptedProvider
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.store.replies import HeldReplyRecords
from core.tools import ToolRegistry
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import until as telegram_until
from tests.workers import build_worker

PATIENCE = 20.0
SECRET = "two-gateways-webhook-secret"

MENU = command_registry().menu()


class Counted:
    """A gateway's adapter, counting the stream pieces and final texts it was handed."""

    def __init__(self, adapter: ChannelAdapter) -> None:
        self.adapter = adapter
        self.pieces = 0

    @property
    def platform(self) -> str:
        return self.adapter.platform

    @property
    def bot_key(self) -> str:
        return self.adapter.bot_key

    async def run(self, sink: InboundSink) -> None:
        await self.adapter.run(sink)

    async def deliver(self, outbound: Outbound) -> None:
        if outbound.kind in ("delta", "reply"):
            self.pieces += 1
        await self.adapter.deliver(outbound)

    async def stop(self) -> None:
        await self.adapter.stop()


def _answers() -> dict[str, str]:
    """Question -> answer: short ones in a few pieces, long ones over several messages."""
    short = "Hello there, this is one answer."
    paragraphs = [
        f"Paragraph {n} of the long answer number {{k}} goes on for a while about plans "
        f"and steps and how each of them follows from the one before it, plainly. " * 6
        for n in range(1, 21)
    ]
    long = "\n\n".join(paragraphs)
    return {
        "q1": short,
        "q2": long.replace("{k}", "2"),
        "q3": "A second short answer, also in pieces.",
        "q4": long.replace("{k}", "4"),
    }


ANSWERS = _answers()


def _pieces(text: str, count: int = 8) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _answer(request: ModelRequest) -> list[ModelEvent]:
    asked = request.messages[-1].text.strip()
    events: list[ModelEvent] = [TextDelta(text=piece) for piece in _pieces(ANSWERS[asked])]
    events.append(Finished())
    return events


def _expected(answer: str, render: Callable[[str], list[str]], size: int) -> list[str]:
    """The messages one gateway alone shows for `answer`."""

    async def send(index: int, chunk: str) -> str:
        raise AssertionError("not called")

    async def edit(message_id: str, chunk: str) -> None:
        raise AssertionError("not called")

    target = ReplyTarget(send=send, edit=edit, render=render, part_size=size)
    return IncrementalRender()(answer, target)


@asynccontextmanager
async def _worker(redis_url: str, tmp_path: Path) -> AsyncIterator[None]:
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"))
    bus = await RedisBus.connect(redis_url)
    client = connect_redis(redis_url)
    provider = ScriptedProvider([_answer] * len(ANSWERS))
    runtime = AgentRuntime(provider=provider, model="test-model", tools=ToolRegistry(), store=store)
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        stream_interval=0.0,
        mailboxes=RedisMailboxes(client),
    )
    task = asyncio.create_task(worker.run(), name="test-worker")
    try:
        yield
    finally:
        await worker.stop(grace=PATIENCE)
        async with asyncio.timeout(PATIENCE):
            await task
        await bus.close()
        await client.aclose()
        await store.close()


@asynccontextmanager
async def _gateways(
    redis_url: str,
    records_url: str,
    adapters: Sequence[Callable[[ReplyStreams], ChannelAdapter]],
) -> AsyncIterator[list[Counted]]:
    """One gateway per adapter maker, each with its own bus connection and records (in the
    database at `records_url`, held in Redis)."""
    async with AsyncExitStack() as stack:
        counted: list[Counted] = []
        runs: list[asyncio.Task[None]] = []
        for make in adapters:
            bus = await RedisBus.connect(redis_url)
            stack.push_async_callback(bus.close)
            sql = await SqlReplyRecords.open(records_url)
            stack.push_async_callback(sql.close)
            client = connect_redis(redis_url)
            stack.push_async_callback(client.aclose)
            records = HeldReplyRecords(sql, RedisReplyHolds(client))
            adapter = Counted(make(ReplyStreams(records, IncrementalRender())))
            gateway = Gateway(adapter, bus, mailboxes=RedisMailboxes(client), readiness=Readiness())
            counted.append(adapter)
            runs.append(asyncio.create_task(gateway.run()))
            stack.push_async_callback(_stopped, gateway, runs[-1])
        yield counted


def _records(tmp_path: Path) -> str:
    """The reply records' database both gateways share."""
    return f"sqlite+aiosqlite:///{tmp_path / 'replies.db'}"


async def _stopped(gateway: Gateway, run: asyncio.Task[None]) -> None:
    await gateway.stop()
    async with asyncio.timeout(PATIENCE):
        with contextlib.suppress(asyncio.CancelledError):
            await run


async def test_two_slack_gateways_show_every_streamed_reply_whole_and_once(
    fake_slack: FakeSlack, redis_url: str, tmp_path: Path
) -> None:
    fake = fake_slack

    def slack(replies: ReplyStreams) -> SlackAdapter:
        settings = SlackSettings(
            bot_token=SecretStr(fake.bot_token),
            signing_secret=SecretStr(fake.signing_secret),
            api_url=fake.api_url,
            host="127.0.0.1",
            port=0,
        )
        return SlackAdapter(settings, menu=MENU, replies=replies)

    channels = {question: f"D0{n}" for n, question in enumerate(ANSWERS, start=1)}
    async with (
        _worker(redis_url, tmp_path),
        _gateways(redis_url, _records(tmp_path), [slack, slack]) as gateways,
    ):
        adapters = [g.adapter for g in gateways]
        assert all(isinstance(a, SlackAdapter) for a in adapters)
        for adapter in adapters:
            assert isinstance(adapter, SlackAdapter)
            async with asyncio.timeout(PATIENCE):
                await adapter.listening.wait()
        for n, (question, channel) in enumerate(channels.items()):
            adapter = adapters[n % 2]
            assert isinstance(adapter, SlackAdapter)
            url = f"http://127.0.0.1:{adapter.port}/slack/events"
            status, _ = await fake.post_event(url, fake.dm(question, channel=channel))
            assert status == 200

        expected = {
            channel: _expected(ANSWERS[q], slack_chunks, SLACK_LIMIT)
            for q, channel in channels.items()
        }

        def whole() -> bool:
            return all(fake.sent_texts(c) == texts for c, texts in expected.items())

        await fake.until(whole, "every answer shown whole", PATIENCE)
        # Every question ends with the answered reaction in place of the taken one,
        # whichever gateway put that there.
        await fake.until(
            lambda: (
                all(
                    fake.reactions[key] == {"white_check_mark"}
                    for key in list(fake.reactions)
                    if key[0] in channels.values()
                )
                and len(fake.calls_to("reactions.remove")) >= len(channels)
            ),
            "the answered reactions",
            PATIENCE,
        )
        pieces = [g.pieces for g in gateways]

    for question, channel in channels.items():
        texts = fake.sent_texts(channel)
        assert texts == expected[channel]
        if len(ANSWERS[question]) > SLACK_LIMIT:
            assert len(texts) >= 2
        # Every message was posted once: no second first message, no duplicates.
        posted = [c for c in fake.calls_to("chat.postMessage") if c.params["channel"] == channel]
        assert len(posted) == len(texts)
    # Both gateways took pieces of the replies.
    assert all(count > 0 for count in pieces), pieces
    marked = {channel for channel, _ in fake.reactions}
    assert marked == set(channels.values()), fake.reactions
    assert all(names == {"white_check_mark"} for names in fake.reactions.values()), fake.reactions


async def test_two_telegram_webhook_gateways_show_every_streamed_reply_whole_and_once(
    fake_telegram: FakeTelegram, redis_url: str, tmp_path: Path
) -> None:
    fake = fake_telegram

    def telegram(replies: ReplyStreams) -> TelegramAdapter:
        settings = TelegramSettings(
            token=SecretStr(fake.token),
            api_url=fake.url,
            webhook_url="http://127.0.0.1/tg-hook",
            webhook_secret=SecretStr(SECRET),
            webhook_host="127.0.0.1",
            webhook_port=0,
            typing_interval=0.05,
        )
        return TelegramAdapter(settings, menu=MENU, replies=replies)

    chats = {question: 1000 + n for n, question in enumerate(ANSWERS, start=1)}
    async with (
        _worker(redis_url, tmp_path),
        _gateways(redis_url, _records(tmp_path), [telegram, telegram]) as gateways,
    ):
        adapters = [g.adapter for g in gateways]
        await telegram_until(
            fake,
            lambda: all(isinstance(a, TelegramAdapter) and a.webhook_port for a in adapters),
            "both webhook servers listening",
            PATIENCE,
        )
        for n, (question, chat) in enumerate(chats.items()):
            adapter = adapters[n % 2]
            assert isinstance(adapter, TelegramAdapter)
            url = f"http://127.0.0.1:{adapter.webhook_port}/tg-hook"
            update = fake.private_text(chat, question)
            assert await fake.post_webhook(url, update, secret=SECRET) == 200

        expected = {
            chat: _expected(ANSWERS[q], telegram_chunks, TELEGRAM_LIMIT)
            for q, chat in chats.items()
        }

        def whole() -> bool:
            return all(fake.sent_texts(c) == texts for c, texts in expected.items())

        await telegram_until(fake, whole, "every answer shown whole", PATIENCE)
        # Typing started by one gateway stops when the other showed the answer: the reply's
        # record says it is finished (else it would be renewed for minutes).
        await _until_typing_stops(adapters)
        pieces = [g.pieces for g in gateways]

    for question, chat in chats.items():
        texts = fake.sent_texts(chat)
        assert texts == expected[chat]
        if len(ANSWERS[question]) > TELEGRAM_LIMIT:
            assert len(texts) >= 2
        sends = [
            c
            for c in fake.calls
            if c.method.lower() == "sendmessage" and str(c.params.get("chat_id")) == str(chat)
        ]
        assert len(sends) == len(texts)
    assert all(count > 0 for count in pieces), pieces


async def _until_typing_stops(adapters: Sequence[ChannelAdapter]) -> None:
    """Return once no adapter renews a typing indicator; fail if one keeps on."""
    tasks: list[asyncio.Task[None]] = [
        renewal.task for adapter in adapters for renewal in getattr(adapter, "_typing", {}).values()
    ]
    if not tasks:
        return  # each reply's typing was stopped by the gateway that showed it
    _, renewing = await asyncio.wait(tasks, timeout=PATIENCE)
    assert not renewing, f"{len(renewing)} typing indicator(s) still renewed"
