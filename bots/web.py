"""Wiring of the local web page: its settings, server and gateway over a process's parts.

`web_page()` starts the page (binding its port, printing how to sign in) and yields the
`Gateway` that connects its channel to the bus; `switchboard serve` and `switchboard web` run
that gateway beside their others. Without `SWITCHBOARD_WEB_TOKEN` the token is made once and
kept in the data folder (`web-token`, mode 0600), so a login link still opens the page after
a restart.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import click

from bots.limits import effective_budgets
from bots.platforms import REGISTERED, command_registry
from bots.settings import Settings
from channels.base import settings_from_env
from channels.gateway import Gateway
from channels.web import SPEC, WebAdapter, WebAuth, WebServer, WebSettings
from channels.web.api import ReadApi
from channels.web.auth import new_token
from channels.web.spec import ENV
from core.bus import names
from core.bus.base import Bus
from core.errors import ConfigError
from core.mailbox.base import Mailboxes
from core.metrics import Metrics
from core.profile import Profile
from core.readiness import Readiness
from core.scheduling.book import ScheduleBook
from core.store.base import Store

__all__ = [
    "TOKEN_FILE",
    "event_topics",
    "kept_token",
    "profile_budgets",
    "web_page",
    "web_settings",
]

log = logging.getLogger(__name__)

# `SWITCHBOARD_WEB_PORT=off`: `switchboard serve` runs without the page.
OFF = "off"
# The generated token, in the data folder.
TOKEN_FILE = "web-token"
# A kept token shorter than a configured one may be is not used (someone wrote the file).
_SHORTEST = 16


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
    mailboxes: Mailboxes,
    readiness: Readiness,
    profile: Profile,
    data_dir: Path,
    coordination: Settings,
    optional: bool = False,
    metrics: Metrics | None = None,
) -> AsyncIterator[Gateway | None]:
    """The page, listening, and the gateway of its channel (to be run by the caller).

    `data_dir` keeps the generated token when none is configured; `coordination` says where
    the heartbeat board is (its Platforms view reads it as `switchboard status` does).
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
    if settings.token is not None:
        auth = WebAuth(settings.token.get_secret_value())
    else:
        auth = WebAuth(await asyncio.to_thread(kept_token, data_dir / TOKEN_FILE), generated=True)
    # Imported here: the status command's module brings click's command machinery.
    from bots.commands.status import open_board

    board = await open_board(coordination)
    server = WebServer(
        host=settings.host,
        port=settings.port,
        auth=auth,
        adapter=adapter,
        bus=bus,
        topics=event_topics(),
        api=ReadApi(
            store=store,
            book=ScheduleBook(store),
            addresses=REGISTERED.addresses(),
            budgets=profile_budgets(profile),
        ),
        board=board,
    )
    try:
        await server.start()
    except OSError as exc:
        await board.aclose()
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
            adapter,
            bus,
            mailboxes=mailboxes,
            readiness=readiness,
            consumer=f"gateway-{SPEC.name}",
            metrics=metrics,
        )
    finally:
        await server.close()
        await board.aclose()


def profile_budgets(profile: Profile) -> dict[str, float]:
    """The profile's spending limits in USD by name (`max_spend_usd` is `per_session` where
    that is unset): the ones the budget guard applies."""
    budgets = effective_budgets(profile.settings)
    return {name: limit for name, limit in budgets.model_dump().items() if limit is not None}


def kept_token(path: Path) -> str:
    """The token kept at `path`, made (and written with mode 0600) when there is none yet.

    A token that cannot be kept (a read-only folder) is made fresh for this start, with a
    warning: the page still opens, with a link that lasts until the next start.
    """
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        kept = ""  # none yet, or not text: made anew
    except OSError as exc:
        log.warning("cannot read the web page's token from %s: %s", path, exc)
        return new_token()
    if len(kept) >= _SHORTEST:
        try:
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)
        except OSError as exc:
            log.warning("cannot make %s private to its owner: %s", path, exc)
        return kept
    token = new_token()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)  # a file that was there keeps its mode otherwise
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(token + "\n")
    except OSError as exc:
        log.warning(
            "cannot keep the web page's token in %s (%s): it lasts until the next start", path, exc
        )
    return token
