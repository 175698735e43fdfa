"""Two bots (`SWITCHBOARD_BOT_ID`) share one redis-server: each `switchboard worker` answers
only its own bot's messages, into its own bot's queues, and keeps its sessions in its own
database (here each bot's data folder)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Inbound, Outbound, decode
from tests.e2e.processes import Deployment, clean_env, until
from tests.fakes import FakeOpenAI, Reply, Text

BOTS = ("alpha", "beta")
CHAT = Address(platform="telegram", bot="b", chat="42")


def _echo(body: dict[str, Any]) -> Awaitable[Reply]:
    async def reply() -> Reply:
        user = [m for m in body.get("messages") or [] if m.get("role") == "user"][-1]
        content = user.get("content")
        text = content if isinstance(content, str) else " ".join(p["text"] for p in content)
        return Text(f"answer to {text}")

    return reply()


async def _replies(client: aioredis.Redis, keys: RedisKeys) -> list[str]:
    """The texts of the replies waiting on a bot's Telegram outbound queue."""
    entries = cast(
        list[tuple[bytes, dict[bytes, bytes]]],
        await client.xrange(keys.queue_stream(outbound_queue("telegram"))),
    )
    texts = []
    for _, fields in entries:
        envelope = decode(fields[b"data"])
        if isinstance(envelope, Outbound) and envelope.kind == "reply":
            texts.append(envelope.text)
    return texts


@pytest.mark.timeout(60)
async def test_two_bots_on_one_redis_answer_only_their_own_messages(
    redis_url: str, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    script: list[Callable[[dict[str, Any]], Awaitable[Reply]]] = [_echo] * 10
    fake_openai.script(*script)
    env = clean_env(tmp_path, redis_url=redis_url, openai=fake_openai)
    keys = {bot: RedisKeys(bot) for bot in BOTS}
    client = aioredis.Redis.from_url(redis_url)
    mailboxes = [RedisMailboxes.from_url(redis_url, keys=keys[bot]) for bot in BOTS]
    try:
        async with Deployment(env, tmp_path) as deployment:
            workers = [
                await deployment.start(
                    "worker",
                    name=f"worker-{bot}",
                    SWITCHBOARD_BOT_ID=bot,
                    SWITCHBOARD_DATA_DIR=str(tmp_path / bot),
                )
                for bot in BOTS
            ]
            for worker in workers:
                await worker.until_logged(r"worker (worker-\w+) taking work")
            # The same chat, the same session key, on both bots.
            for bot, boxes in zip(BOTS, mailboxes, strict=True):
                await boxes.put(
                    Inbound(
                        address=CHAT,
                        user_id="42",
                        text=f"hello {bot}",
                        is_direct=True,
                        platform_message_id="1",
                    ),
                )

            async def both_answered() -> bool:
                return all([await _replies(client, keys[bot]) for bot in BOTS])

            await until(both_answered, 30, "both bots' replies", deployment.describe)
            for bot in BOTS:
                assert await _replies(client, keys[bot]) == [f"answer to hello {bot}"]
            assert await client.keys("sb:q:*") == []  # nothing outside a bot's namespace
            for worker in workers:
                assert await worker.stop() == 0, worker.describe()
        for bot in BOTS:
            store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / bot / 'switchboard.db'}")
            try:
                [session] = await store.list_sessions()
                said = [m.text for m in await store.list_messages(session.id)]
            finally:
                await store.close()
            assert said == [f"hello {bot}", f"answer to hello {bot}"]
    finally:
        for boxes in mailboxes:
            await boxes.aclose()
        await client.aclose()
