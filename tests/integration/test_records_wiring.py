"""Where `backends` and `open_store` keep the records: the SQL store on DATABASE_URL (the data
directory's SQLite file when unset), with or without REDIS_URL: Redis only coordinates, so a
Redis emptied loses none of them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bots.app import backends, open_store
from bots.settings import Settings
from core.backends.sql.store import SqlReplyRecords, SqlStore
from core.messages import Message, TextPart
from core.store.replies import HeldReplyRecords, ReplyRecord
from tests.fixtures.sqlite_store_v12 import DB
from tests.redis_server import RedisServer


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own, to empty at will."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **given: str | None) -> Settings:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return Settings(SWITCHBOARD_DATA_DIR=tmp_path / "data", **given)  # type: ignore[arg-type]


async def test_the_embedded_deployment_keeps_its_records_in_the_data_directorys_sql_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(monkeypatch, tmp_path)

    async with backends(settings) as found:
        assert isinstance(found.store, SqlStore)
        assert isinstance(found.replies, SqlReplyRecords)
        session = await found.store.current_session("telegram:b:1")
        await found.store.append_message(
            session.id, Message(role="user", content=[TextPart(text="hi")])
        )

    # The file the queues are in holds the records too, under the SQL store's schema.
    assert settings.database_path.exists()
    store = await SqlStore.open(f"sqlite:///{settings.database_path}")
    try:
        [message] = await store.list_messages(session.id)
    finally:
        await store.close()
    assert message.text == "hi"


async def test_an_old_embedded_stores_file_is_converted_when_the_bot_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(monkeypatch, tmp_path)
    settings.data_dir.mkdir()
    shutil.copyfile(DB, settings.database_path)

    async with open_store(settings) as store:
        current = await store.find_current_session("telegram:b:42")
        assert current is not None
        assert (await store.list_messages(current.id))[0].text == "hi"
        assert [a.user_id for a in await store.approvals(None)] == ["u2"]


async def test_with_redis_and_a_database_url_the_records_outlive_an_emptied_redis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, own_redis: str, postgres_url: str
) -> None:
    settings = _settings(monkeypatch, tmp_path, REDIS_URL=own_redis, DATABASE_URL=postgres_url)

    async with backends(settings) as found:
        assert found.distributed
        assert isinstance(found.store, SqlStore)
        session = await found.store.current_session("telegram:b:1")
        await found.store.append_message(
            session.id, Message(role="user", content=[TextPart(text="kept")])
        )
    client = aioredis.Redis.from_url(own_redis)
    try:
        await client.flushall()
    finally:
        await client.aclose()

    async with open_store(settings) as store:
        again = await store.current_session("telegram:b:1")
        assert again.id == session.id
        assert [m.text for m in await store.list_messages(session.id)] == ["kept"]


async def test_with_redis_alone_the_records_are_in_the_data_directorys_sql_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, own_redis: str
) -> None:
    settings = _settings(monkeypatch, tmp_path, REDIS_URL=own_redis)

    async with backends(settings) as found:
        assert found.distributed
        assert isinstance(found.store, SqlStore)
        assert isinstance(found.replies, HeldReplyRecords)
        session = await found.store.current_session("telegram:b:1")
        await found.store.append_message(
            session.id, Message(role="user", content=[TextPart(text="kept")])
        )
        async with found.replies.hold("telegram:update:1"):
            await found.replies.save(ReplyRecord(key="telegram:update:1", seq=2, finished=True))
        # Redis holds coordination only: no key of the conversation or of the reply's record.
        client = aioredis.Redis.from_url(own_redis)
        try:
            names = [str(key) for key in await client.keys("*")]
            assert not [name for name in names if session.id in name or "reply:" in name]
            await client.flushall()
        finally:
            await client.aclose()
        record = await found.replies.get("telegram:update:1")
        assert record is not None and record.finished

    assert settings.database_path.exists()
    async with open_store(settings) as store:
        assert isinstance(store, SqlStore)
        assert [m.text for m in await store.list_messages(session.id)] == ["kept"]
