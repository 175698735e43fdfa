"""Alembic's environment for the SQL store's schema (`core/backends/sql/store/_schema.py` runs it).

`SqlStore.open` hands over an open connection (`config.attributes["connection"]`), on which
the revisions run in one transaction. The `alembic` command line works too: it is given a
URL (`-x url=...` or `sqlalchemy.url`) and opens an async engine of its own.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


given = config.attributes.get("connection")
if given is not None:
    _run(given)
elif context.is_offline_mode():
    raise SystemExit("the SQL store's migrations run against a database, not offline")
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database: alembic -x url=sqlite+aiosqlite:///path ...")
    asyncio.run(_run_with_own_engine(url))
