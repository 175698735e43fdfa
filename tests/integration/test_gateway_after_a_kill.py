"""A gateway started after another was killed delivers to every chat at once.

A gateway killed while showing a reply leaves that reply held (`RedisReplyHolds`: a lease of
30 s that nobody renews or removes). Its replacement must wait for that reply's hold, but only
in that chat's lane: every other chat's answer goes out meanwhile. Seen in the fault matrix
as a replacement that sent nothing to anyone for about 30 s after a SIGKILL.

The real `TelegramAdapter` delivers through a `Gateway` on a `RedisBus` with its reply records
in a SQLite file and their holds in Redis; the killed gateway's hold is left in Redis as it
would be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import redis.asyncio as aioredis
from pydantic import SecretStr

from channels.gateway import Gateway
from channels.streaming import IncrementalRender, ReplyStreams
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.redis.bus import RedisBus
from core.backends.redis.client import connect_redis
from core.backends.redis.keys import RedisKeys
from core.backends.redis.replies_hold import RedisReplyHolds
from core.backends.sql.store import SqlReplyRecords
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from core.readiness import Readiness
from core.store.replies import HeldReplyRecords
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS
from tests.integration.telegram_helpers import BOT_KEY, reply_containing

HELD_CHAT = 1001
OTHER_CHAT = 1002


def _reply(chat: int, text: str, reply_key: str) -> Outbound:
    address = Address(platform="telegram", bot=BOT_KEY, chat=str(chat))
    return Outbound(kind="reply", address=address, text=text, reply_key=reply_key)


async def test_a_reply_left_held_by_a_killed_gateway_delays_only_its_own_chat(
    fake_telegram: FakeTelegram, redis_url: str, tmp_path: Path
) -> None:
    fake = fake_telegram
    raw = aioredis.Redis.from_url(redis_url)
    bus = await RedisBus.connect(redis_url)
    sql = await SqlReplyRecords.open(f"sqlite+aiosqlite:///{tmp_path / 'records.db'}")
    client = connect_redis(redis_url)
    records = HeldReplyRecords(sql, RedisReplyHolds(client))
    try:
        held = _reply(HELD_CHAT, "the answer the killed gateway was showing", "q-held")
        # The killed gateway's hold on that reply, left to lapse (30 s).
        hold = RedisKeys().reply_hold(held.record_key)
        await raw.set(hold, "killed-gateway", px=30_000)
        queue = outbound_queue("telegram")
        await bus.enqueue(queue, held)
        await bus.enqueue(queue, _reply(OTHER_CHAT, "an answer for another chat", "q-other"))

        adapter = TelegramAdapter(
            TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
            menu=COMMANDS.menu(),
            replies=ReplyStreams(records, IncrementalRender()),
        )
        gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness())
        running = asyncio.create_task(gateway.run())
        try:
            await reply_containing(fake, OTHER_CHAT, "an answer for another chat")
            assert fake.sent_texts(HELD_CHAT) == []
            assert await raw.exists(hold) == 1

            await raw.delete(hold)  # the lease lapses
            await reply_containing(fake, HELD_CHAT, "the answer the killed gateway")
        finally:
            await gateway.stop()
            await running
    finally:
        await client.aclose()
        await sql.close()
        await bus.close()
        await raw.aclose()
