"""`switchboard db`: the records' database schema (`core/store/migrations/`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from bots.commands.common import settings_from
from bots.settings import Settings
from core.store.sql import Revision, database_revision, head_revision, parse_url, upgrade_database

__all__ = ["db"]


@click.group()
def db() -> None:
    """Look at or upgrade the schema of the records' database.

    The database is DATABASE_URL (`postgresql://...` or `sqlite:///path`), else the SQLite
    file in SWITCHBOARD_DATA_DIR. Every process upgrades it on start as well; `db upgrade`
    does it ahead of a deployment.
    """


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the schema revision the database is at."""
    settings = settings_from(ctx)
    if _missing_file(settings) is not None:
        click.echo("not created yet")
        return
    revision = asyncio.run(database_revision(settings.store_url))
    hint = " (`switchboard db upgrade` converts it)" if revision.old_store else ""
    click.echo(f"{_describe(revision)}{hint}")


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Upgrade the database to the newest schema revision (making it if needed)."""
    settings = settings_from(ctx)
    before, after = asyncio.run(upgrade_database(settings.store_url))
    if before == after:
        click.echo(f"already at {_describe(after)}")
    else:
        click.echo(f"upgraded from {_describe(before)} to {_describe(after)}")


def _describe(revision: Revision) -> str:
    if revision.old_store:
        return "the old embedded store's schema"
    if revision.current is None:
        return "not created yet"
    newest = head_revision()
    return (
        revision.current if revision.current == newest else f"{revision.current} (newest {newest})"
    )


def _missing_file(settings: Settings) -> Path | None:
    """The SQLite file the settings name, when it is not there (reading it would make it)."""
    url = parse_url(settings.store_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    path = Path(url.database)
    return None if path.exists() else path
