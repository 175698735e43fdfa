"""Rate limits shared by every worker through Redis (issue 17, point 4): two `RateLimits`, as
two worker processes build them (`bots/limits.py`), over a real redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bots.limits import forget_rate_counters, open_rate_limits
from bots.profiles import load_profile
from bots.settings import Settings
from core.envelopes import Address, Inbound
from core.profile import ProfileSettings
from core.ratelimit import RateLimitSettings
from core.store.people import Person

REPO = Path(__file__).resolve().parents[2]

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


async def test_a_forgotten_persons_counters_go_and_others_stay(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`switchboard people forget` drops the person's counters (rate, daily turns, notices)
    as the settings' profile names its limits; another person's and the chat's stay."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("SWITCHBOARD_BOT_ID", "shop")
    monkeypatch.setenv("SWITCHBOARD_PROFILES_DIR", str(REPO / "profiles"))
    settings = Settings()
    options = load_profile(settings.profiles_dir, settings.profile).settings
    limits, close = open_rate_limits(settings, options)
    try:
        for user in ("U7", "U8"):
            assert await limits.admit(said(user), is_admin=False) == (True, None)
        before = await _keys(redis_url)

        await forget_rate_counters(settings, Person(platform="slack", user_id="U7"))

        after = await _keys(redis_url)
    finally:
        await close()
    gone = before - after
    assert gone and all("U7" in key for key in gone), gone
    assert not any("U7" in key for key in after), after
    assert any("U8" in key for key in after) and any("D7" in key for key in after), after


async def _keys(redis_url: str) -> set[str]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        return {key.decode() for key in await client.keys("*") if isinstance(key, bytes)}
    finally:
        await client.aclose()
