"""`switchboard memory`: the facts the bot remembers about a person, and forgetting them."""

from __future__ import annotations

import asyncio

import click

from bots.app import open_store
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole, wrapped
from bots.commands.where import STORE_EPILOG, describe_store, require_data
from bots.settings import Settings
from core.errors import ConfigError
from core.facts import MemoryFact, memory_scope

__all__ = ["memory"]

_PERSON = "PLATFORM:USER_ID"


@click.group()
def memory() -> None:
    """Look at and forget what the bot remembers about a person (`remember` in a chat).

    A person is PLATFORM:USER_ID (`telegram:12345`, `terminal:local`); facts belong to the
    profile too (--profile). The store is the one the settings name: SWITCHBOARD_DATA_DIR's
    SQLite file, or Redis with REDIS_URL.
    """


@memory.command("list", epilog=STORE_EPILOG)
@click.argument("person", metavar=_PERSON)
@click.option("--profile", help="Profile whose memory (default: SWITCHBOARD_PROFILE or default).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@AS_JSON
@click.pass_context
def memory_list(
    ctx: click.Context, person: str, profile: str | None, limit: int, as_json: bool
) -> None:
    """List the facts remembered about PERSON, newest first."""
    settings = settings_from(ctx, profile=profile)
    scope = _scope(settings, person)
    require_data(settings)
    asyncio.run(_list(settings, scope, limit, as_json))


@memory.command("forget", epilog=STORE_EPILOG)
@click.argument("person", metavar=_PERSON)
@click.argument("fact_id", metavar="FACT_ID")
@click.option("--profile", help="Profile whose memory (default: SWITCHBOARD_PROFILE or default).")
@click.pass_context
def memory_forget(ctx: click.Context, person: str, fact_id: str, profile: str | None) -> None:
    """Forget one fact about PERSON (its id from `switchboard memory list`)."""
    settings = settings_from(ctx, profile=profile)
    scope = _scope(settings, person)
    require_data(settings)
    asyncio.run(_forget(settings, scope, fact_id))


def _scope(settings: Settings, person: str) -> str:
    platform, _, user = person.partition(":")
    try:
        return memory_scope(settings.profile, platform.strip().lower(), user.strip())
    except ValueError:
        raise ConfigError(
            f"{person!r} is not a person: use {_PERSON}, e.g. telegram:12345"
        ) from None


async def _list(settings: Settings, scope: str, limit: int, as_json: bool) -> None:
    async with open_store(settings) as store:
        facts = await store.list_facts(scope, limit=limit)
    if as_json:
        echo_json([fact.model_dump(mode="json") for fact in facts])
        return
    console = stdout()
    if not facts:
        console.print(f"Nothing remembered for {scope} (store: {_where(settings)}).", markup=False)
        return
    table = listing(whole("id"), whole("remembered (UTC)"), whole("from"), wrapped("fact"))
    for fact in facts:
        table.add_row(fact.id, f"{fact.created_at:%Y-%m-%d %H:%M}", _origin(fact), fact.text)
    console.print(table)


async def _forget(settings: Settings, scope: str, fact_id: str) -> None:
    async with open_store(settings) as store:
        forgotten = await store.forget_fact(scope, fact_id)
    if not forgotten:
        raise ConfigError(f"no fact {fact_id!r} for {scope} (see `switchboard memory list`)")
    click.echo(f"Forgot {fact_id}.")


def _origin(fact: MemoryFact) -> str:
    """Where a fact came from: `remember` ("tool"), or consolidation of which session."""
    if fact.source == "consolidated":
        return f"consolidated ({fact.source_session})" if fact.source_session else fact.source
    return fact.source


def _where(settings: Settings) -> str:
    return describe_store(settings)
