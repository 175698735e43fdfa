"""`switchboard people`: everything kept about one person, exported or erased on request."""

from __future__ import annotations

import asyncio
import sys

import click

from bots.app import open_store
from bots.commands.common import echo_json, settings_from
from bots.commands.where import STORE_EPILOG, require_data
from bots.settings import Settings
from core.errors import ConfigError
from core.store.people import Erasure, Person

__all__ = ["people"]

_PERSON = "PLATFORM:USER_ID"


def _person(_ctx: click.Context, _param: click.Parameter, value: str) -> Person:
    try:
        return Person.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group()
def people() -> None:
    """Export or erase everything kept about one person (a data request).

    A person is PLATFORM:USER_ID (`telegram:12345`, `slack:U0123ABCD`). What is theirs: their
    direct conversations, their own messages in groups, remembered facts, schedules they own,
    pairing and approval records, and the costs of their calls (docs/operators.md).
    """


@people.command("export", epilog=STORE_EPILOG)
@click.argument("person", metavar=_PERSON, callback=_person)
@click.pass_context
def people_export(ctx: click.Context, person: Person) -> None:
    """Print everything kept about PERSON as JSON."""
    settings = settings_from(ctx)
    require_data(settings)
    asyncio.run(_export(settings, person))


@people.command("forget", epilog=STORE_EPILOG)
@click.argument("person", metavar=_PERSON, callback=_person)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def people_forget(ctx: click.Context, person: Person, yes: bool) -> None:
    """Erase everything kept about PERSON; their messages in groups become a tombstone and
    their costs stay in the ledger without their name, so totals still add up."""
    settings = settings_from(ctx)
    require_data(settings)
    if not yes:
        if not sys.stdin.isatty():
            raise ConfigError(f"erasing {person} cannot be undone: confirm with --yes")
        asked = f"Erase everything kept about {person}? This cannot be undone"
        if not click.confirm(asked, default=False):
            click.echo("Nothing erased.")
            return
    erased = asyncio.run(_forget(settings, person))
    click.echo(_told(person, erased))


async def _export(settings: Settings, person: Person) -> None:
    async with open_store(settings) as store:
        data = await store.personal_data(person)
    echo_json(data.model_dump(mode="json"))


async def _forget(settings: Settings, person: Person) -> Erasure:
    async with open_store(settings) as store:
        erased = await store.erase_person(person)
    if settings.redis_url is not None:
        from bots.limits import forget_rate_counters

        await forget_rate_counters(settings, person)
    return erased


def _told(person: Person, erased: Erasure) -> str:
    said = (
        f"Erased {person}: {erased.sessions_deleted} conversation(s) deleted, "
        f"{erased.messages_tombstoned} group message(s) replaced, "
        f"{erased.facts_deleted} fact(s), {erased.schedules_deleted} schedule(s), "
        f"{erased.access_records_deleted} pairing/approval record(s) and "
        f"{erased.checkpoints_deleted} turn record(s) deleted, "
        f"{erased.costs_anonymised} cost entr(ies) kept without their name."
    )
    if not erased.compacted:
        said += (
            " The database could not be compacted yet (another process holds it):"
            " run this again when the bot is stopped to free the bytes."
        )
    return said
