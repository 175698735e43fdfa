"""`REDIS_URL` through Sentinel (`redis+sentinel://`) and its other forms, against a real
Sentinel the suite starts, monitoring the suite's redis-server as its master."""

from __future__ import annotations

import uuid

import pytest

from bots.limits import open_rate_limits
from bots.settings import Settings
from core.backends.redis.bus import RedisBus
from core.backends.redis.client import redis_client
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.redis.urls import parse_redis_url
from core.envelopes import Address, Inbound
from core.profile import ProfileSettings
from core.ratelimit import RateLimitSettings
from tests.redis_server import RedisSentinelServer


def test_a_sentinel_url_names_its_sentinels_service_and_database() -> None:
    location = parse_redis_url("redis+sentinel://:s3cret@10.0.0.1:26380,sentinel-b/main/2")

    assert location.kind == "sentinel"
    assert location.nodes == (("10.0.0.1", 26380), ("sentinel-b", 26379))
    assert (location.service, location.db, location.password) == ("main", 2, "s3cret")


def test_a_cluster_url_names_its_nodes() -> None:
    location = parse_redis_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7001")

    assert location.kind == "cluster"
    assert location.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://:s3cret@127.0.0.1:26379", "needs the service name"),
        ("redis+sentinel://:s3cret@127.0.0.1:26379/main/x", "must be a number"),
        ("redis+cluster://:s3cret@127.0.0.1:7000/3", "takes no database"),
        ("memcached://:s3cret@127.0.0.1:1", "not a Redis URL"),
    ],
)
def test_a_url_that_names_no_redis_is_one_line_without_its_password(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        parse_redis_url(url)

    assert "\n" not in str(refused.value)
    assert "s3cret" not in str(refused.value)


async def test_a_client_made_through_the_sentinel_reaches_its_master(
    redis_sentinel: RedisSentinelServer,
) -> None:
    client = redis_client(redis_sentinel.url)
    try:
        key = f"sentinel-test:{uuid.uuid4().hex}"
        await client.set(key, b"through the sentinel")
        port = (await client.connection_pool.get_master_address())[1]  # type: ignore[attr-defined]  # a SentinelConnectionPool
        assert port == redis_sentinel.master.port
        assert await client.get(key) == b"through the sentinel"
    finally:
        await client.aclose()


async def test_the_bus_enqueues_and_receives_through_the_sentinel(
    redis_sentinel: RedisSentinelServer,
) -> None:
    bus = await RedisBus.connect(redis_sentinel.url, keys=RedisKeys("sentinel"))
    queue = f"sentinel.{uuid.uuid4().hex}"
    sent = Inbound(address=Address(platform="telegram", chat="42"), user_id="u1", text="hello")
    try:
        await bus.enqueue(queue, sent)
        delivery = await bus.receive(queue, consumer="c1", timeout=5)
        assert delivery is not None and delivery.envelope == sent
        await delivery.ack()
        assert await bus.receive(queue, consumer="c1", timeout=0) is None
    finally:
        await bus.close()


async def test_the_mailboxes_claim_through_the_sentinel(
    redis_sentinel: RedisSentinelServer,
) -> None:
    mailboxes = RedisMailboxes.from_url(
        redis_sentinel.url, keys=RedisKeys(f"t{uuid.uuid4().hex[:12]}")
    )
    work = Inbound(address=Address(platform="telegram", chat="7"), user_id="u1", text="hi")
    try:
        await mailboxes.put(work)
        claim = await mailboxes.claim(work.session_key, owner="w1")
        assert claim is not None
        head = await claim.head()
        assert head is not None and head.text == "hi"
        await claim.done(head)
        assert await claim.release() is False
        assert await mailboxes.pending() == []
    finally:
        await mailboxes.aclose()


async def test_the_rate_limits_count_through_the_sentinel(
    redis_sentinel: RedisSentinelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_sentinel.url)
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", f"t{uuid.uuid4().hex[:12]}")
    options = ProfileSettings(
        limits=RateLimitSettings(rate_limit="2/minute", chat_rate_limit="", daily_turns=0)
    )
    said = Inbound(address=Address(platform="slack", bot="B1", chat="D7"), user_id="U7", text="hi")
    limits, close = open_rate_limits(Settings(), options)
    try:
        answers = [(await limits.admit(said, is_admin=False))[0] for _ in range(3)]
    finally:
        await close()

    assert answers == [True, True, False]
