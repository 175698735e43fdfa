"""Stores that start at the newest schema revision without upgrading an empty database each
time: a SQLite file upgraded once and copied, a PostgreSQL database copied from a template.

Upgrading an empty database runs every migration (a tenth of a second or more for SQLite, a
second of round trips for PostgreSQL on a busy machine); a test of what a store does, not of
the upgrade, gets a copy instead. `tests/integration/test_sql_store_schema.py` and the tests
that open a store in a folder of their own still upgrade empty databases.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from core.backends.sql.store import SqlStore

__all__ = ["copy_of", "upgraded"]


async def upgraded(url: str) -> None:
    """Open (so upgrade to the newest revision) and close the store at `url`."""
    store = await SqlStore.open(url)
    await store.close()


def copy_of(template: Path, folder: Path) -> Path:
    """A copy of the SQLite file `template` in `folder` (made private, as the store makes
    its own folder), under the template's name; its path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Path(shutil.copy2(template, folder / template.name))
