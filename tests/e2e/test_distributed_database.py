"""The distributed deployment with its records in PostgreSQL (DATABASE_URL): Redis emptied
between two messages of a chat, the second is answered with the first in its history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.processes import Deployment, clean_env
from tests.e2e.test_distributed import redis_client, until_answered
from tests.fakes import FakeOpenAI, FakeTelegram, Reply, Text

pytestmark = pytest.mark.e2e

CHAT = 3001


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            texts.append(str(content))
    return texts


@pytest.mark.timeout(90)
async def test_a_chat_keeps_its_history_when_redis_comes_back_empty(
    redis_url: str,
    postgres_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    asked: list[list[str]] = []

    async def answer(body: dict[str, Any]) -> Reply:
        asked.append(_user_texts(body))
        return Text(f"answer {len(asked)}")

    fake_openai.script(answer, answer)
    env = clean_env(tmp_path, redis_url=redis_url, telegram=fake_telegram, openai=fake_openai)
    env["DATABASE_URL"] = postgres_url

    async with Deployment(env, tmp_path) as deployment:
        gateway = await deployment.start("gateway", "telegram")
        worker = await deployment.start("worker")
        await deployment.ready(fake_telegram.wait_idle_poll(timeout=30))
        fake_telegram.private_text(CHAT, "my name is Ada")
        await deployment.ready(until_answered(fake_telegram, [CHAT], timeout=30), timeout=31)
        for process in (worker, gateway):
            assert await process.stop() == 0, process.describe()

    # Everything Redis held is gone: queues, mailboxes, and any record it might have kept.
    async with redis_client(redis_url) as client:
        await client.flushall()

    async with Deployment(env, tmp_path) as deployment:
        gateway = await deployment.start("gateway", "telegram")
        worker = await deployment.start("worker")
        await deployment.ready(fake_telegram.wait_idle_poll(timeout=30))
        fake_telegram.private_text(CHAT, "what is my name?")

        def second_answer(_call: object = None) -> bool:
            return len(fake_telegram.sent_texts(CHAT)) >= 2

        await deployment.ready(
            fake_telegram.wait_for_call("sendMessage", second_answer, timeout=30), timeout=31
        )
        for process in (worker, gateway):
            assert await process.stop() == 0, process.describe()

    assert fake_telegram.sent_texts(CHAT) == ["answer 1", "answer 2"]
    assert asked == [["my name is Ada"], ["my name is Ada", "what is my name?"]]
