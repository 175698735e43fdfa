"""A Telegram gateway standing by for the poller lease delivers answers meanwhile.

After a polling gateway is SIGKILLed its lease stays taken until it lapses (15 s); the gateway
that takes over must not hold every answer back until then. The real `TelegramAdapter`
delivers through a `Gateway` on a `MemoryBus` to the Bot API fake before it polls.
"""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.bus.names import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.readiness import Readiness
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, PATIENCE, local_replies
from tests.integration.telegram_helpers import BOT_KEY, calls_to, reply_containing

CHAT = 4242


def _parts(fake: FakeTelegram) -> tuple[MemoryBus, Gateway]:
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    bus = MemoryBus()
    return bus, Gateway(adapter, bus, mailboxes=MemoryMailboxes(), readiness=Readiness())


def _reply(text: str) -> Outbound:
    address = Address(platform="telegram", bot=BOT_KEY, chat=str(CHAT))
    return Outbound(kind="reply", address=address, text=text)


async def test_a_standby_delivers_before_it_polls_and_polls_once_it_leads(
    fake_telegram: FakeTelegram,
) -> None:
    fake = fake_telegram
    bus, gateway = _parts(fake)
    lease = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(gateway.run(receive_after=lease))
    try:
        await bus.enqueue(outbound_queue("telegram"), _reply("answered while standing by"))
        await reply_containing(fake, CHAT, "answered while standing by")
        assert calls_to(fake, "getUpdates") == []  # another gateway polls

        lease.set_result(True)
        await fake.wait_idle_poll(timeout=PATIENCE)
        fake.private_text(CHAT, "hello")
        woken = await gateway.mailboxes.woken(PATIENCE)
        assert woken is not None
        claim = await gateway.mailboxes.claim(woken, owner="test")
        assert claim is not None
        head = await claim.head()
        assert isinstance(head, Inbound) and head.text == "hello"
    finally:
        await gateway.stop()
        await running
        await bus.close()


async def test_a_standby_stopped_before_it_leads_closes_what_it_opened(
    fake_telegram: FakeTelegram,
) -> None:
    fake = fake_telegram
    bus, gateway = _parts(fake)
    lease = asyncio.get_running_loop().create_future()
    running = asyncio.create_task(gateway.run(receive_after=lease))
    try:
        await bus.enqueue(outbound_queue("telegram"), _reply("one answer"))
        await reply_containing(fake, CHAT, "one answer")
    finally:
        await gateway.stop()
        lease.set_result(False)
        await running
        await bus.close()
    assert calls_to(fake, "getUpdates") == []
