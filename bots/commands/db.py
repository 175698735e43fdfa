"""`switchboard db`: the records' database schema (`core/store/migrations/`)."""

from __future__ import annotations

import asyncio

import click

from bots.commands.common import settings_from
from core.backends.sql.store import (
    Revision,
    database_revision,
    head_revision,
    sqlite_file,
    upgrade_database,
)

__all__ = ["db", "describe_revision"]


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
    path = sqlite_file(settings.store_url)
    if path is not None and not path.exists():
        click.echo("not created yet")
        return
    revision = asyncio.run(database_revision(settings.store_url))
    hint = " (`switchboard db upgrade` converts it)" if revision.old_store else ""
    click.echo(f"{describe_revision(revision)}{hint}")


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Upgrade the database to the newest schema revision (making it if needed)."""
    settings = settings_from(ctx)
    before, after = asyncio.run(upgrade_database(settings.store_url))
    if before == after:
        click.echo(f"already at {describe_revision(after)}")
    else:
        click.echo(f"upgraded from {describe_revision(before)} to {describe_revision(after)}")


def describe_revision(revision: Revision) -> str:
    """`0001`, `0001 (newest 0002)`, `not created yet` or the old embedded store's schema."""
    if revision.old_store:
        return "the old embedded store's schema"
    if revision.current is None:
        return "not created yet"
    newest = head_revision()
    return (
        revision.current if revision.current == newest else f"{revision.current} (newest {newest})"
    )
