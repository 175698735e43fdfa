"""A gateway killed in the middle of an upload loses no file: the `file` delivery, bytes and
all, stays in the outbound queue unacknowledged (decision 0008), and once its lease lapses
the next gateway uploads it. The real `TelegramAdapter` on a `RedisBus` with a short lease."""

from __future__ import annotations

import asyncio
import contextlib

from pydantic import SecretStr

from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from channels.telegram.spec import SPEC
from core.backends.redis.bus import RedisBus
from core.backends.redis.client import redis_client
from core.backends.redis.mailboxes import RedisMailboxes
from core.bus.names import outbound_queue
from core.envelopes import Address, Attachment, Outbound
from core.readiness import Readiness
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, local_replies
from tests.integration.telegram_helpers import BOT_KEY, until

DM = 555
REPORT = Attachment(name="report.pdf", media_type="application/pdf", data=b"%PDF-1.4 q3")


def _gateway(
    fake: FakeTelegram, bus: RedisBus, mailboxes: RedisMailboxes
) -> tuple[TelegramAdapter, Gateway]:
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
        uploads=SPEC.uploads,
    )
    return adapter, Gateway(adapter, bus, mailboxes=mailboxes, readiness=Readiness())


async def test_a_file_cut_off_mid_upload_is_uploaded_by_the_next_gateway(
    fake_telegram: FakeTelegram, redis_url: str
) -> None:
    fake = fake_telegram
    bus = await RedisBus.connect(redis_url, lease_seconds=1.0)
    client = redis_client(redis_url)
    mailboxes = RedisMailboxes(client)
    try:
        address = Address(platform="telegram", bot=BOT_KEY, chat=str(DM))
        await bus.enqueue(
            outbound_queue("telegram"), Outbound(kind="file", address=address, attachments=[REPORT])
        )
        fake.stall_next("sendDocument")  # the upload never finishes: the gateway dies in it
        first, killed = _gateway(fake, bus, mailboxes)
        running = asyncio.create_task(killed.run())
        await fake.wait_for_call("sendDocument")
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await first.stop()
        assert fake.uploads == []

        second, replacement = _gateway(fake, bus, mailboxes)
        running = asyncio.create_task(replacement.run())
        try:
            await until(fake, lambda: bool(fake.uploads), "the upload by the next gateway", 10.0)
        finally:
            await replacement.stop()
            await running
            await second.stop()
    finally:
        await bus.close()
        await client.aclose()
    (upload,) = fake.uploads
    assert (upload.method, upload.file.filename, upload.file.data) == (
        "sendDocument",
        "report.pdf",
        REPORT.data,
    )
    assert fake.sent_texts(DM) == [""]  # the document itself, and no note of a failure
