"""`switchboard takeover` and `switchboard handback`: an operator answers a chat in the bot's
place (`core/takeover.py`; what they send goes with `switchboard notify ADDRESS TEXT`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import click

from bots.app import open_store
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole
from bots.commands.where import STORE_EPILOG, require_data
from bots.platforms import REGISTERED
from bots.settings import Settings
from core.envelopes import Address
from core.notifications.external import check_reachable
from core.takeover import Takeovers, parse_takeover_duration

__all__ = ["handback", "parse_chat", "takeover"]


def parse_chat(text: str) -> Address:
    """The chat ADDRESS names (as `switchboard notify` reads it); a usage error otherwise."""
    try:
        address = REGISTERED.addresses().parse(text)
        check_reachable(address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ADDRESS") from None
    return address


@click.command(epilog=STORE_EPILOG)
@click.argument("address", required=False)
@click.option(
    "--for",
    "duration",
    default="4h",
    show_default=True,
    help="How long, e.g. 30m, 2h, 1d: then the bot answers again by itself.",
)
@click.option("--list", "show", is_flag=True, help="Show the chats taken over now.")
@AS_JSON
@click.pass_context
def takeover(
    ctx: click.Context, address: str | None, duration: str, show: bool, as_json: bool
) -> None:
    """Take the chat ADDRESS over: the bot stores what people write there and answers nothing.

    ADDRESS is a chat: telegram:<chat id>, slack:<channel id>, discord:<channel id>... Answer
    with `switchboard notify ADDRESS TEXT` (or the web page); `switchboard handback ADDRESS`
    gives it back. Works while `serve` (or the workers) run, and across restarts.
    """
    settings = settings_from(ctx)
    if show:
        if address is not None:
            raise click.UsageError("give either ADDRESS or --list")
        require_data(settings)
        asyncio.run(_list(settings, as_json))
        return
    if address is None:
        raise click.UsageError("give ADDRESS (or --list)")
    target = parse_chat(address)
    try:
        length = parse_takeover_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--for") from None
    asyncio.run(_take_over(settings, target, length))


@click.command(epilog=STORE_EPILOG)
@click.argument("address")
@click.option("--quiet", is_flag=True, help="Leave no note in the history for the model.")
@click.pass_context
def handback(ctx: click.Context, address: str, quiet: bool) -> None:
    """Give the chat ADDRESS back to the bot.

    Unless --quiet, a short note in the conversation tells the model a person answered there
    meanwhile.
    """
    settings = settings_from(ctx)
    target = parse_chat(address)
    require_data(settings)
    asyncio.run(_hand_back(settings, target, quiet))


async def _take_over(settings: Settings, target: Address, length: timedelta) -> None:
    async with open_store(settings) as store:
        kept = await Takeovers(store).take_over(target, by="cli", duration=length)
    click.echo(
        f"Took over {kept.chat} until {kept.until:%Y-%m-%d %H:%M} UTC. Answer with "
        f"`switchboard notify {kept.chat} TEXT`; give it back with "
        f"`switchboard handback {kept.chat}`."
    )


async def _hand_back(settings: Settings, target: Address, quiet: bool) -> None:
    async with open_store(settings) as store:
        ended = await Takeovers(store).hand_back(target, quiet=quiet)
    if ended is None:
        click.echo(f"{target} was not taken over.")
        return
    note = "" if quiet else " (with a note in its history)"
    click.echo(f"Handed {ended.chat} back to the bot{note}.")


async def _list(settings: Settings, as_json: bool) -> None:
    async with open_store(settings) as store:
        running = await Takeovers(store).running()
    if as_json:
        echo_json([found.model_dump(mode="json") for found in running])
        return
    if not running:
        click.echo("No chat is taken over.")
        return
    table = listing(whole("chat"), whole("by"), whole("since (UTC)"), whole("until (UTC)"))
    for found in running:
        table.add_row(
            found.chat, found.by, f"{found.since:%Y-%m-%d %H:%M}", f"{found.until:%Y-%m-%d %H:%M}"
        )
    stdout().print(table)
