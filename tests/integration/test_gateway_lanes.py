"""A gateway delivers concurrently across chats and in order within one: a rate-limited chat
waits alone.

The real `TelegramAdapter` (python-telegram-bot) delivers through a `Gateway` on a `MemoryBus`
to the Bot API fake, which refuses one chat's messages with 429 `retry_after` until the test
lets it through.
"""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from core.readiness import Readiness
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, local_replies
from tests.integration.telegram_helpers import BOT_KEY, calls_to, reply_containing, until

LIMITED = -1001
OTHER = -1002


def _reply(chat: int, text: str) -> Outbound:
    address = Address(platform="telegram", bot=BOT_KEY, chat=str(chat))
    return Outbound(kind="reply", address=address, text=text)


async def test_a_rate_limited_chat_delays_only_itself_and_keeps_its_order(
    fake_telegram: FakeTelegram,
) -> None:
    fake = fake_telegram
    # Telegram limits one group: every message to it is refused until the test says so.
    fake.fail_next(
        "sendMessage",
        description="Too Many Requests: retry after 1",
        retry_after=1,
        times=10_000,
        chat_id=LIMITED,
    )
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    bus = MemoryBus()
    gateway = Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness())
    running = asyncio.create_task(gateway.run())
    try:
        queue = outbound_queue("telegram")
        await bus.enqueue(queue, _reply(LIMITED, "first to the limited chat"))
        await bus.enqueue(queue, _reply(LIMITED, "second to the limited chat"))
        await bus.enqueue(queue, _reply(OTHER, "to the other chat"))

        await reply_containing(fake, OTHER, "to the other chat")
        assert calls_to(fake, "sendMessage", LIMITED)  # tried, refused, waiting it out
        assert fake.sent_texts(LIMITED) == []

        fake.stop_failing("sendMessage", chat_id=LIMITED)
        await until(fake, lambda: len(fake.sent_texts(LIMITED)) == 2, "both limited replies")
        assert fake.sent_texts(LIMITED) == [
            "first to the limited chat",
            "second to the limited chat",
        ]
    finally:
        await gateway.stop()
        await running
        await bus.close()
