"""Rate limits shared by every worker through Redis (issue 17, point 4): two `RateLimits`, as
two worker processes build them (`bots/limits.py`), over a real redis-server."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from bots.limits import open_rate_limits
from bots.settings import Settings
from core.envelopes import Address, Inbound
from core.profile import ProfileSettings
from core.ratelimit import RateLimitSettings

DM = Address(platform="slack", bot="B1", chat="D7")


def said(user: str = "U7") -> Inbound:
    return Inbound(address=DM, user_id=user, text="hi", is_direct=True)


async def test_two_workers_share_the_counters_and_the_one_notice(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", "shop")
    settings = Settings()
    options = ProfileSettings(
        limits=RateLimitSettings(rate_limit="3/minute", chat_rate_limit="", daily_turns=0)
    )
    first, close_first = open_rate_limits(settings, options)
    second, close_second = open_rate_limits(settings, options)
    try:
        answers = [
            await worker.admit(said(), is_admin=False)
            for worker in (first, second, first, second, first, second)
        ]
        other = await second.admit(said("U8"), is_admin=False)
    finally:
        await close_first()
        await close_second()

    assert [allowed for allowed, _ in answers] == [True, True, True, False, False, False]
    notices = [notice for _, notice in answers if notice is not None]
    assert len(notices) == 1 and "3 per minute" in notices[0]
    assert other == (True, None)
    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [key.decode() for key in await client.keys("*") if isinstance(key, bytes)]
    finally:
        await client.aclose()
    # Every counter lives in this bot's namespace.
    assert keys and all(key.startswith("sb:shop:limits") for key in keys), keys
