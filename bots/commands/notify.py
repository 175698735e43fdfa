"""`switchboard notify` (an external notification or agent turn) and `switchboard hooks` (the
HTTP listener for the same, `bots/hooks.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Literal

import click

from bots.app import backends
from bots.commands.common import LOG, on_signals, settings_from
from bots.hooks import HooksServer, HooksSettings
from bots.platforms import REGISTERED
from bots.profiles import load_profile
from bots.settings import Settings
from bots.tracing import traced
from core.bus.base import Bus
from core.envelopes import Address, NotificationSource
from core.errors import ConfigError
from core.mailbox.base import Mailboxes
from core.notifications.external import Notifier, check_reachable
from core.profile import Profile
from core.takeover import Takeovers

__all__ = ["hooks", "hooks_listener", "notify"]

_SESSION = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@click.command()
@click.argument("address")
@click.argument("text", required=False)
@click.option("--prompt", help="Run a turn answering this instead, and deliver its answer.")
@click.option(
    "--policy",
    type=click.Choice(["always", "conditional"]),
    default="always",
    show_default=True,
    help="With --prompt: `conditional` delivers only an answer that starts with [NOTIFY].",
)
@click.option(
    "--session",
    default="cli",
    show_default=True,
    help="With --prompt: the turn runs in the session notify:<session>.",
)
@click.option("--key", help="Idempotency key: the same key queues the request only once.")
@click.pass_context
def notify(
    ctx: click.Context,
    address: str,
    text: str | None,
    prompt: str | None,
    policy: Literal["always", "conditional"],
    session: str,
    key: str | None,
) -> None:
    """Deliver TEXT to ADDRESS as it is, or with --prompt the answer of a turn.

    ADDRESS is a chat: telegram:<chat id>, slack:<channel id>, discord:<channel id>...
    The turn runs under the target chat's capability mode, in the session notify:<session>.
    The request is queued for `switchboard serve` (or the gateway and workers); its receipt
    shows on `switchboard events --topic notifications`.
    """
    settings = settings_from(ctx)
    if (text is None) == (prompt is None):
        raise click.UsageError("give either TEXT or --prompt TEXT")
    if not _SESSION.match(session):
        raise click.BadParameter(
            "letters, digits, '.', '_' or '-', at most 64", param_hint="--session"
        )
    try:
        target = REGISTERED.addresses().parse(address)
        check_reachable(target)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ADDRESS") from None
    asyncio.run(_notify(settings, target, text, prompt, policy, session, key))


async def _notify(
    settings: Settings,
    target: Address,
    text: str | None,
    prompt: str | None,
    policy: Literal["always", "conditional"],
    session: str,
    key: str | None,
) -> None:
    async with backends(settings) as found:
        notifier = Notifier(found.bus, found.mailboxes)
        if prompt is not None:
            source = NotificationSource(kind="cli", name=session)
            ident = await notifier.ask(
                target, prompt, policy=policy, session=session, source=source, key=key
            )
            click.echo(f"Queued the prompt for {target} (id {ident}, session notify:{session}).")
            return
        assert text is not None
        ident = await notifier.notify(
            target, text, source=NotificationSource(kind="cli", name="notify"), key=key
        )
        # In a chat taken over, what the operator sends is part of the conversation.
        kept = await Takeovers(found.store).operator_said(target, text, ident=ident)
        click.echo(f"Queued the notification for {target} (id {ident}).")
        if kept is not None:
            click.echo("Kept it in the conversation as the operator's (taken over).")


@click.command()
@click.option("--profile", help="Profile folder under profiles/ (default: default).")
@click.pass_context
def hooks(ctx: click.Context, profile: str | None) -> None:
    """Run the HTTP hooks listener alone (POST /hooks/notify and /hooks/agent).

    Needs SWITCHBOARD_HOOKS_PORT and SWITCHBOARD_HOOKS_TOKEN (24+ characters); binds
    SWITCHBOARD_HOOKS_HOST (default 127.0.0.1). Targets are limited to the profile's
    `[hooks] targets`. Requests are queued for `serve` or the gateways and workers.
    """
    settings = settings_from(ctx, profile=profile)
    if settings.hooks_port is None:
        raise ConfigError("`switchboard hooks` needs SWITCHBOARD_HOOKS_PORT (and a token)")
    with traced("hooks"):
        asyncio.run(_hooks(settings))


async def _hooks(settings: Settings) -> None:
    profile = await asyncio.to_thread(load_profile, settings.profiles_dir, settings.profile)
    check_hooks(settings, profile)
    async with (
        backends(settings) as found,
        hooks_listener(settings, profile, found.bus, found.mailboxes),
    ):
        stopped = asyncio.Event()

        async def stop() -> None:
            stopped.set()

        on_signals(lambda: [stop()])
        await stopped.wait()


def check_hooks(settings: Settings, profile: Profile) -> HooksSettings | None:
    """The listener's settings, or None when SWITCHBOARD_HOOKS_PORT is unset; `ConfigError`
    (before anything starts) when they are wrong."""
    if settings.hooks_port is None:
        return None
    token = settings.hooks_token.get_secret_value() if settings.hooks_token else None
    return HooksSettings.build(
        port=settings.hooks_port,
        token=token,
        host=settings.hooks_host,
        options=profile.settings.hooks,
        addresses=REGISTERED.addresses(),
    )


@contextlib.asynccontextmanager
async def hooks_listener(
    settings: Settings, profile: Profile, bus: Bus, mailboxes: Mailboxes
) -> AsyncIterator[None]:
    """The hooks listener while the block runs, when SWITCHBOARD_HOOKS_PORT is set."""
    checked = check_hooks(settings, profile)
    if checked is None:
        yield
        return
    server = HooksServer(
        checked, notifier=Notifier(bus, mailboxes), addresses=REGISTERED.addresses()
    )
    await server.start()
    if not checked.targets:
        LOG.warning("hooks listener: the profile has no [hooks] targets, so every request gets 403")
    try:
        yield
    finally:
        await server.close()
