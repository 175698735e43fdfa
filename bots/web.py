"""Wiring of the local web page: its settings, server and gateway over a process's parts.

`web_page()` starts the page (binding its port, printing how to sign in) and yields the
`Gateway` that connects its channel to the bus; `switchboard serve` and `switchboard web` run
that gateway beside their others.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import click

from bots.limits import effective_budgets
from bots.platforms import REGISTERED, command_registry
from channels.base import settings_from_env
from channels.gateway import Gateway
from channels.web import SPEC, WebAdapter, WebAuth, WebServer, WebSettings
from channels.web.api import ReadApi
from channels.web.spec import ENV
from core.bus import names
from core.bus.base import Bus
from core.errors import ConfigError
from core.metrics import Metrics
from core.profile import Profile
from core.readiness import Readiness
from core.scheduling.book import ScheduleBook
from core.store.base import Store

__all__ = ["event_topics", "profile_budgets", "web_page", "web_settings"]

log = logging.getLogger(__name__)

# `SWITCHBOARD_WEB_PORT=off`: `switchboard serve` runs without the page.
OFF = "off"


def web_settings(env: Mapping[str, str]) -> WebSettings | None:
    """The page's settings from the environment; None when it is turned off."""
    if env.get(ENV["port"], "").strip().lower() == OFF:
        return None
    return settings_from_env(WebSettings, env, ENV)


def event_topics() -> tuple[str, ...]:
    """The bus topics the page streams live: lifecycle events and notifications."""
    return (names.EVENTS, names.NOTIFICATIONS)


@asynccontextmanager
async def web_page(
    settings: WebSettings,
    *,
    store: Store,
    bus: Bus,
    readiness: Readiness,
    profile: Profile,
    optional: bool = False,
    metrics: Metrics | None = None,
) -> AsyncIterator[Gateway | None]:
    """The page, listening, and the gateway of its channel (to be run by the caller).

    `ConfigError` when the port is taken; with `optional` (other channels are served) a taken
    default port is a warning and yields None instead.
    """
    if not settings.loopback:
        log.warning(
            "%s=%s is not a loopback address: the web page is reachable from other machines "
            "(the token still guards it)",
            ENV["host"],
            settings.host,
        )
    menu = command_registry().menu()
    adapter = WebAdapter(
        commands=frozenset(word for info in menu for word in (info.name, *info.aliases))
    )
    token = settings.token.get_secret_value() if settings.token else None
    server = WebServer(
        host=settings.host,
        port=settings.port,
        auth=WebAuth(token),
        adapter=adapter,
        bus=bus,
        topics=event_topics(),
        api=ReadApi(
            store=store,
            book=ScheduleBook(store),
            addresses=REGISTERED.addresses(),
            budgets=profile_budgets(profile),
        ),
    )
    try:
        await server.start()
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        if optional and settings.port == WebSettings().port:
            log.warning("the web page cannot listen on %s (%s); serving without it", where, exc)
            yield None
            return
        raise ConfigError(
            f"the web page cannot listen on {where}: {exc.strerror or exc}; set "
            f"{ENV['port']} to a free port (or {OFF})"
        ) from None
    try:
        if server.auth.generated:
            # Printed, never logged: the link holds the token.
            click.echo(f"Web page: open {server.login_link()} to sign in", err=True)
        else:
            click.echo(f"Web page: {server.url} (sign in with {ENV['token']})", err=True)
        yield Gateway(
            adapter, bus, readiness=readiness, consumer=f"gateway-{SPEC.name}", metrics=metrics
        )
    finally:
        await server.close()


def profile_budgets(profile: Profile) -> dict[str, float]:
    """The profile's spending limits in USD by name (`max_spend_usd` is `per_session` where
    that is unset): the ones the budget guard applies."""
    budgets = effective_budgets(profile.settings)
    return {name: limit for name, limit in budgets.model_dump().items() if limit is not None}
