"""`switchboard playbook list|clear`: the tool sequences a bot learned worked, for operators.

The playbook holds tool names, keyword digests, counts and times, no one's words (decision
0026); listing shows the sequences, clearing starts the bot's playbook afresh.
"""

from __future__ import annotations

import asyncio
import sys

import click

from bots.app import open_store
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole, wrapped
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.settings import Settings
from core.errors import ConfigError

__all__ = ["playbook"]

_PROFILE_HELP = "Profile whose playbook (default: SWITCHBOARD_PROFILE or default)."


@click.group()
def playbook() -> None:
    """List or clear the tool sequences a bot learned worked (its playbook).

    Each profile has its own playbook; the store is the one the settings name.
    """


@playbook.command("list", epilog=STORE_EPILOG)
@click.option("--profile", help=_PROFILE_HELP)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@AS_JSON
@click.pass_context
def playbook_list(ctx: click.Context, profile: str | None, limit: int, as_json: bool) -> None:
    """List the profile's tool sequences, the most successful first."""
    settings = settings_from(ctx, profile=profile)
    require_data(settings)
    asyncio.run(_list(settings, limit, as_json))


async def _list(settings: Settings, limit: int, as_json: bool) -> None:
    async with open_store(settings) as store:
        found = await store.list_sequences(settings.profile, limit=limit)
    if as_json:
        echo_json([item.model_dump(mode="json") for item in found])
        return
    if not found:
        click.echo(
            f"The playbook of {settings.profile} is empty. The store is {describe_store(settings)}."
        )
        return
    table = listing(wrapped("tools"), whole("successes"), whole("keywords"), whole("last (UTC)"))
    for item in found:
        table.add_row(
            " → ".join(item.tools),
            str(item.successes),
            str(item.keywords),
            f"{item.updated_at:%Y-%m-%d %H:%M:%S}",
        )
    stdout().print(table)


@playbook.command("clear", epilog=STORE_EPILOG)
@click.option("--profile", help=_PROFILE_HELP)
@click.option("--yes", is_flag=True, help="Clear without asking first.")
@click.pass_context
def playbook_clear(ctx: click.Context, profile: str | None, yes: bool) -> None:
    """Delete every record of the profile's playbook (the hints start again from nothing)."""
    settings = settings_from(ctx, profile=profile)
    require_data(settings)
    if not yes:
        if not sys.stdin.isatty():
            raise ConfigError(
                f"not clearing the playbook of {settings.profile} without asking: pass --yes"
            )
        if not click.confirm(f"Clear the playbook of {settings.profile}?", default=False):
            click.echo("Nothing cleared.")
            return
    asyncio.run(_clear(settings))


async def _clear(settings: Settings) -> None:
    async with open_store(settings) as store:
        gone = await store.clear_playbook(settings.profile)
    click.echo(f"Cleared the playbook of {settings.profile}: {gone} records.")
