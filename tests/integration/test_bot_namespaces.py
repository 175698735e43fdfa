"""Two bots on one Redis (`SWITCHBOARD_BOT_ID`): neither takes the other's work or state.

Each bot's bus, mailboxes and leadership are built with its own `RedisKeys`, as `bots/app.py`
builds them from the settings, on the suite's one redis-server; each bot's records are in a
database of its own (its data directory's SQLite file here, or its DATABASE_URL).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bots.settings import load_settings
from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.bus.names import RECEIPTS
from core.envelopes import Address, Inbound
from core.errors import ConfigError
from core.leader import Leadership
from core.messages import Message
from core.scheduling.models import IntervalCadence, Schedule

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CHAT = Address(platform="telegram", bot="b", chat="42")


@dataclass
class Bot:
    """One deployment's Redis backends."""

    keys: RedisKeys
    bus: RedisBus
    store: SqlStore
    mailboxes: RedisMailboxes


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def bots(
    redis_url: str, raw: aioredis.Redis, tmp_path: Path
) -> AsyncIterator[tuple[Bot, Bot]]:
    made = []
    for bot_id in ("sales", "support"):
        keys = RedisKeys(bot_id)
        made.append(
            Bot(
                keys,
                await RedisBus.connect(redis_url, lease_seconds=60, keys=keys),
                await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / bot_id / 'records.db'}"),
                RedisMailboxes(raw, keys=keys, lease_seconds=60),
            )
        )
    yield made[0], made[1]
    for bot in made:
        await bot.bus.close()
        await bot.store.close()


def _inbound(text: str) -> Inbound:
    return Inbound(address=CHAT, user_id="7", text=text, is_direct=True)


def _schedule() -> Schedule:
    return Schedule(
        id="sched-1",
        cadence=IntervalCadence(seconds=60, start=START),
        prompt="Ping",
        deliver_to=CHAT,
        owner="telegram:7",
        next_run_at=START,
        created_at=START,
        updated_at=START,
    )


async def test_a_bot_takes_only_its_own_inbound_work(bots: tuple[Bot, Bot]) -> None:
    sales, support = bots
    await sales.mailboxes.put(_inbound("for sales"))

    assert await support.mailboxes.woken(0.01) is None
    assert await support.mailboxes.pending() == []
    assert await sales.mailboxes.woken(1) == CHAT.session_key
    claim = await sales.mailboxes.claim(CHAT.session_key, owner="w1")
    assert claim is not None
    head = await claim.head()
    assert head is not None and head.text == "for sales"
    await claim.release()


async def test_sessions_of_the_same_key_are_separate_per_bot(bots: tuple[Bot, Bot]) -> None:
    sales, support = bots
    key = _inbound("x").session_key
    mine = await sales.store.current_session(key)
    await sales.store.append_message(mine.id, Message.user("hello sales"))

    theirs = await support.store.current_session(key)
    assert theirs.id != mine.id
    assert await support.store.get_session(mine.id) is None
    assert [s.id for s in await support.store.list_sessions()] == [theirs.id]
    assert await support.store.list_messages(mine.id) == []


async def test_schedules_and_processed_marks_are_per_bot(bots: tuple[Bot, Bot]) -> None:
    sales, support = bots
    await sales.store.save_schedule(_schedule())

    assert [s.id for s in await sales.store.due_schedules(START)] == ["sched-1"]
    assert await support.store.due_schedules(START) == []
    assert await support.store.list_schedules() == []

    assert await sales.store.mark_processed("telegram:b:update-1") is True
    assert await support.store.is_processed("telegram:b:update-1") is False
    assert await support.store.mark_processed("telegram:b:update-1") is True


async def test_mailboxes_and_turn_claims_are_per_bot(bots: tuple[Bot, Bot]) -> None:
    sales, support = bots
    inbound = _inbound("queued")
    await sales.mailboxes.put(inbound)

    assert await support.mailboxes.pending() == []
    assert await sales.mailboxes.pending() == [inbound.session_key]
    first = await sales.mailboxes.claim(inbound.session_key, owner="w1")
    other = await support.mailboxes.claim(inbound.session_key, owner="w1")
    assert first is not None
    assert other is not None  # another bot's session of the same key is not held
    assert await support.mailboxes.claim(inbound.session_key, owner="w2") is None
    await first.release()
    await other.release()


async def test_each_bot_has_its_own_leader(raw: aioredis.Redis) -> None:
    leaders = [
        Leadership(raw, "telegram-poller:bot", owner="gw", keys=RedisKeys(bot_id), ttl=60)
        for bot_id in ("sales", "support")
    ]
    for leader in leaders:
        # Returns only once held: a shared lease would leave the second one waiting.
        await asyncio.wait_for(leader.acquire(), 5)
    for leader in leaders:
        await leader.release()


def test_the_bot_id_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", "support")
    assert load_settings().redis_keys.queue_stream(RECEIPTS) == "sb:support:q:{q:receipts}"
    monkeypatch.delenv("SWITCHBOARD_BOT_ID")
    assert load_settings().redis_keys.queue_stream(RECEIPTS) == "sb:default:q:{q:receipts}"


def test_a_bot_id_that_could_reach_into_another_namespace_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", "sales:q")
    with pytest.raises(ConfigError, match="SWITCHBOARD_BOT_ID"):
        load_settings()
    with pytest.raises(ValueError, match="bot id"):
        RedisKeys("sales:q")
