"""Wiring of the rate limits and budgets of issue 17: where the counters live, and the
`per_session` budget's older name; and the watchdog's (issue 35), which tells the same admins.

The counters are coordination: in Redis when `REDIS_URL` is set (every worker shares them),
else this process's memory (the embedded deployment is one process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from bots.platforms import REGISTERED, Platforms
from bots.settings import Settings
from core.budgets import BudgetAlerts, BudgetGuard, Budgets
from core.bus.base import Bus
from core.envelopes import Address
from core.metrics import Metrics
from core.profile import ProfileSettings
from core.ratelimit import RateLimits
from core.readiness import Readiness
from core.store.base import Store
from core.store.people import Person
from core.watchdog import AdminAlerts, Watchdog

if TYPE_CHECKING:
    from limits.aio.storage import RedisStorage, Storage

    from core.backends.redis.client import AnyRedis

__all__ = [
    "admin_dms",
    "budget_guard",
    "effective_budgets",
    "forget_rate_counters",
    "open_rate_limits",
    "watching",
]


def open_rate_limits(
    settings: Settings, options: ProfileSettings, client: AnyRedis | None = None
) -> tuple[RateLimits, Callable[[], Awaitable[None]]]:
    """The profile's rate limits over the deployment's counters, and what closes them.

    `client` is the process's shared Redis client (`bots/app.py`): the counters' scripts then
    go through it. Without it the counters get a pool of their own.
    """
    if settings.redis_url is None:
        # Made on the first message tested: `switchboard chat`, whose terminal is exempt,
        # never makes it.
        return RateLimits(options.limits, _memory_storage), _nothing
    # Imported here: redis-py is only loaded by processes that use it.
    from limits.aio.storage import RedisClusterStorage, RedisStorage
    from redis.asyncio import ConnectionPool
    from redis.asyncio.cluster import RedisCluster

    from core.backends.redis.client import connect_redis
    from core.backends.redis.urls import parse_redis_url

    kind = parse_redis_url(settings.redis_url).kind
    if kind != "server" and client is None:
        # A Sentinel's master or a cluster: a client of our own, as a shared one would be.
        own = connect_redis(settings.redis_url)
        limits, _ = open_rate_limits(settings, options, own)
        return limits, own.aclose
    if isinstance(client, RedisCluster):
        # The package's cluster storage (its keys of one limit share a hash tag), sending
        # through the process's cluster client.
        clustered = RedisClusterStorage(
            f"async+{settings.redis_url}",
            implementation="redispy",
            key_prefix=settings.redis_keys.rate_limits(),
        )
        _send_through(clustered, client)
        return RateLimits(options.limits, clustered), _nothing
    # The package's redis-py bridge takes a pool: the shared client's (a Sentinel's master's
    # included), or our own (so that its connections are closed).
    pool = (
        client.connection_pool
        if client is not None
        else ConnectionPool.from_url(settings.redis_url)
    )
    storage = RedisStorage(
        f"async+{settings.redis_url}",
        implementation="redispy",
        key_prefix=settings.redis_keys.rate_limits(),
        connection_pool=pool,  # type: ignore[arg-type]  # typed narrower than it takes
    )
    if client is None:
        return RateLimits(options.limits, storage), pool.aclose
    _send_through(storage, client)
    return RateLimits(options.limits, storage), _nothing


async def forget_rate_counters(settings: Settings, person: Person) -> None:
    """Drop `person`'s rate counters in Redis (`switchboard people forget`), as the settings'
    profile names its limits."""
    from bots.profiles import load_profile

    options = load_profile(settings.profiles_dir, settings.profile).settings
    limits, close = open_rate_limits(settings, options)
    try:
        await limits.forget(person.platform, person.user_id)
    finally:
        await close()


def _send_through(storage: RedisStorage, client: AnyRedis) -> None:
    """Have `storage` send its commands and scripts through `client`.

    The redis-py bridge makes a plain client on the pool it is given and registers its scripts
    on it; both are swapped for the shared client (the attributes the bridge's own
    `use_basic` and `register_scripts` set), so it uses the process's pool and retries.
    """
    from limits.aio.storage.redis.redispy import RedispyBridge

    bridge = storage.bridge
    if not isinstance(bridge, RedispyBridge):
        return
    # Typed as the package's protocol of a client, which redis-py's class meets in practice.
    shared = cast("Any", client)
    bridge.storage = shared
    bridge.connection_getter = lambda _readonly: shared
    bridge.register_scripts()


async def _nothing() -> None:
    return None


def _memory_storage() -> Storage:
    from limits.aio.storage import MemoryStorage

    return MemoryStorage()


def effective_budgets(options: ProfileSettings) -> Budgets:
    """`[budgets]`, with `max_spend_usd` standing in for an unset `per_session`."""
    budgets = options.budgets
    if budgets.per_session is None and options.max_spend_usd is not None:
        budgets = budgets.model_copy(update={"per_session": options.max_spend_usd})
    return budgets


def budget_guard(
    options: ProfileSettings, store: Store, bus: Bus, platforms: Platforms = REGISTERED
) -> BudgetGuard:
    """The layered budgets checked before each model call; hits are reported on `events`
    and in the DMs of the admins whose DM address is known."""
    alerts = BudgetAlerts(bus, store, admin_dms=admin_dms(options.admins, platforms))
    return BudgetGuard(effective_budgets(options), store, on_hit=alerts)


def admin_dms(admins: Sequence[str], platforms: Platforms = REGISTERED) -> list[Address]:
    """The DM addresses of the admins (`<platform>:<user id>`), as each registered platform's
    spec makes them from a user id (`ChannelSpec.admin_dm`); admins on a platform that cannot
    tell, or on none registered, get the `events` topic's event only."""
    specs = {spec.name: spec for spec in platforms.specs}
    found: list[Address] = []
    for admin in admins:
        platform, _, user_id = admin.partition(":")
        spec = specs.get(platform)
        if spec is not None and user_id and (address := spec.admin_dm(user_id)) is not None:
            found.append(address)
    return found


@contextlib.asynccontextmanager
async def watching(
    options: ProfileSettings,
    bus: Bus,
    readiness: Readiness,
    metrics: Metrics | None,
    platforms: Platforms = REGISTERED,
) -> AsyncIterator[Watchdog | None]:
    """The process's watchdog over the platforms it serves (None with `[watchdog] enabled =
    false`): checking in the background, its gauges on `/metrics`, incidents told to the
    admins on another platform and on the `events` topic."""
    if not options.watchdog.enabled:
        yield None
        return
    watchdog = Watchdog(
        options.watchdog,
        readiness=readiness,
        tell=AdminAlerts(bus, admin_dms(options.admins, platforms)),
    )
    if metrics is not None:
        metrics.add_probe(watchdog.probe)
    task = asyncio.create_task(watchdog.run(), name="watchdog")
    try:
        yield watchdog
    finally:
        watchdog.stop()
        await task
