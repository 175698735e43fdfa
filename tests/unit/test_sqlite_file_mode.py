"""The SQLite data file and its WAL companions are private to their owner when made."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.backends.sql.bus import SqliteBus
from core.backends.sql.store import SqlStore, sqlite_url


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask of a login shell: files are made readable by everyone (0644)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
async def test_the_data_file_and_its_wal_and_shm_are_made_0600(tmp_path: Path) -> None:
    path = tmp_path / "data" / "switchboard.db"
    store = await SqlStore.open(sqlite_url(path))
    bus = await SqliteBus.open(path)
    try:
        await store.current_session("terminal:local:it")  # a write: the WAL file is in use
        made = sorted(p.name for p in path.parent.iterdir())
        assert made == ["switchboard.db", "switchboard.db-shm", "switchboard.db-wal"]
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
        assert modes == dict.fromkeys(made, 0o600)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        await bus.close()
        await store.close()
