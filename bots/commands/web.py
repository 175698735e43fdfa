"""`switchboard web`: the local web page alone (with a worker and the scheduler when embedded)."""

from __future__ import annotations

import asyncio

import click

from bots.app import backends, embedded
from bots.commands.common import LOG, on_signals, settings_from
from bots.commands.processes import operations, run_with_gateways
from bots.commands.reload import reload_on_hangup
from bots.commands.status import announce
from bots.loop import stop_on_sigterm
from bots.profiles import load_profile
from bots.settings import Settings
from bots.tracing import traced
from bots.web import web_page, web_settings
from channels.web.spec import ENV
from core.errors import ConfigError

__all__ = ["web"]


@click.command()
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def web(ctx: click.Context, profile: str | None) -> None:
    """Serve the local web page: chat, live events, schedules, sessions and costs.

    It listens on 127.0.0.1:SWITCHBOARD_WEB_PORT (default 8765; SWITCHBOARD_WEB_HOST binds
    elsewhere). Sign in with SWITCHBOARD_WEB_TOKEN, or with the link printed at start when it
    is unset. Without REDIS_URL a worker and the scheduler run in this process; with it the
    page's chats go to the Redis bus and `switchboard worker` processes answer them.
    """
    settings = settings_from(ctx, profile=profile)
    with traced("web"):
        asyncio.run(stop_on_sigterm(_web(settings)))


async def _web(settings: Settings) -> None:
    page = web_settings(settings.environ)
    if page is None:
        raise ConfigError(f"{ENV['port']} is off: there is no web page to serve")
    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    if settings.redis_url is None:
        async with (
            embedded(settings, profile) as parts,
            operations(settings, parts.readiness, parts.metrics, parts.bus, parts.mailboxes),
            reload_on_hangup(parts.reloader),  # before `announce`, as in `serve`
            announce(settings, "web"),
            web_page(
                page,
                store=parts.store,
                bus=parts.bus,
                mailboxes=parts.mailboxes,
                readiness=parts.readiness,
                profile=profile,
                data_dir=settings.data_dir,
                coordination=settings,
                metrics=parts.metrics,
            ) as gateway,
        ):
            assert gateway is not None
            on_signals(lambda: [gateway.stop()])
            await run_with_gateways(parts, [gateway])
        return
    async with (
        backends(settings) as found,
        operations(settings, found.readiness, found.metrics, found.bus, found.mailboxes),
        announce(settings, "web"),
        web_page(
            page,
            store=found.store,
            bus=found.bus,
            mailboxes=found.mailboxes,
            readiness=found.readiness,
            profile=profile,
            data_dir=settings.data_dir,
            coordination=settings,
            metrics=found.metrics,
        ) as gateway,
    ):
        assert gateway is not None
        on_signals(lambda: [gateway.stop()])
        LOG.info("web page taking chats for the Redis workers")
        await gateway.run()
