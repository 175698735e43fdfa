"""`switchboard playbook list|clear`, as an operator runs them: a subprocess with a clean
environment over an SQLite store the test fills first."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith(("SWITCHBOARD_", "REDIS_"))
    }
    keep["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "data")
    return keep


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


async def _recorded(database: Path) -> None:
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        for _ in range(3):
            await store.record_sequence("default", ["web_search", "web_fetch"], ["d1", "d2"])
        await store.record_sequence("default", ["calculator"], ["d3"])
        await store.record_sequence("other", ["current_time"], ["d1"])
    finally:
        await store.close()


def test_list_and_clear_one_profiles_playbook(env: dict[str, str], tmp_path: Path) -> None:
    database = tmp_path / "data" / "switchboard.db"
    asyncio.run(_recorded(database))

    listed = run(["playbook", "list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert [row[:-2] for row in rows] == [
        ["web_search", "→", "web_fetch", "3", "2"],
        ["calculator", "1", "1"],
    ], listed.stdout
    as_json = json.loads(run(["playbook", "list", "--json"], env, tmp_path).stdout)
    assert [item["tools"] for item in as_json] == [["web_search", "web_fetch"], ["calculator"]]

    refused = run(["playbook", "clear"], env, tmp_path)  # stdin is no terminal to ask at
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "switchboard: error: not clearing the playbook of default without asking: pass --yes"
    ]
    cleared = run(["playbook", "clear", "--yes"], env, tmp_path)
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.strip() == "Cleared the playbook of default: 3 records."

    empty = run(["playbook", "list"], env, tmp_path)
    assert empty.stdout.strip() == f"The playbook of default is empty. The store is {database}."
    theirs = run(["playbook", "list", "--profile", "other", "--json"], env, tmp_path)
    assert [item["tools"] for item in json.loads(theirs.stdout)] == [["current_time"]]
