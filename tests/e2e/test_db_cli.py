"""`switchboard db upgrade` and `db current` as an operator runs them, on the SQLite file of
the data directory, on an old embedded store's file, and on PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.backends.sql.store import head_revision
from tests.fixtures.sqlite_store_v12 import DB

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, no Redis, no DATABASE_URL."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("SWITCHBOARD_")
    }
    keep.pop("REDIS_URL", None)
    keep.pop("DATABASE_URL", None)
    keep["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "data")
    return keep


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), "db", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_the_data_directorys_file_is_made_then_found_at_the_newest_revision(
    env: dict[str, str], tmp_path: Path
) -> None:
    head = head_revision()

    before = run(["current"], env, tmp_path)
    # Asking made nothing.
    assert not (tmp_path / "data").exists()
    upgraded = run(["upgrade"], env, tmp_path)
    again = run(["upgrade"], env, tmp_path)
    after = run(["current"], env, tmp_path)

    assert (before.returncode, before.stdout) == (0, "not created yet\n")
    assert (upgraded.returncode, upgraded.stdout) == (
        0,
        f"upgraded from not created yet to {head}\n",
    )
    assert (again.returncode, again.stdout) == (0, f"already at {head}\n")
    assert (after.returncode, after.stdout, after.stderr) == (0, f"{head}\n", "")


def test_an_old_embedded_stores_file_is_converted(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    shutil.copyfile(DB, tmp_path / "data" / "switchboard.db")

    before = run(["current"], env, tmp_path)
    upgraded = run(["upgrade"], env, tmp_path)

    assert before.returncode == 0
    assert "old embedded store" in before.stdout
    assert upgraded.returncode == 0
    assert (
        upgraded.stdout == f"upgraded from the old embedded store's schema to {head_revision()}\n"
    )


def test_postgresql_from_database_url(
    env: dict[str, str], tmp_path: Path, postgres_url: str
) -> None:
    env["DATABASE_URL"] = postgres_url

    before = run(["current"], env, tmp_path)
    upgraded = run(["upgrade"], env, tmp_path)
    after = run(["current"], env, tmp_path)

    assert (before.returncode, before.stdout) == (0, "not created yet\n")
    assert upgraded.stdout == f"upgraded from not created yet to {head_revision()}\n"
    assert (after.returncode, after.stdout) == (0, f"{head_revision()}\n")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://someone:hunter2@127.0.0.1:1/records", "cannot reach the SQL store"),
        ("mysql://someone@127.0.0.1/records", "runs on SQLite or PostgreSQL"),
    ],
)
def test_a_database_that_cannot_be_used_is_one_line(
    env: dict[str, str], tmp_path: Path, url: str, said: str
) -> None:
    env["DATABASE_URL"] = url

    for command in ("current", "upgrade"):
        done = run([command], env, tmp_path)

        assert done.returncode == 1
        assert said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr
        assert "hunter2" not in done.stderr
