"""`switchboard sessions fork`, `sessions switch` and `sessions list --chat`: an operator forks a
chat's conversation and switches it back, within that chat only; a wrong session is one line
on stderr and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bots.cli import cli
from core.backends.sql.store import SqlStore
from core.errors import ConfigError
from core.messages import Message

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")
CHAT = "telegram:1:42"
OTHER = "telegram:1:-100"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith(("SWITCHBOARD_", "REDIS_"))
    }
    keep["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "data")
    return keep


@pytest.fixture
def in_process(env: dict[str, str]) -> Iterator[CliRunner]:
    """A runner of the CLI in this process, the logging set-up it makes undone afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield CliRunner(env=env)
    root.handlers[:], level = saved
    root.setLevel(level)


def invoke(runner: CliRunner, args: list[str]) -> Result:
    return runner.invoke(cli, args, catch_exceptions=True)


async def _two_chats(database: Path) -> tuple[str, str]:
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        session = await store.current_session(CHAT)
        await store.append_message(session.id, Message.user("about otters"))
        await store.append_message(session.id, Message.assistant("otters hold hands"))
        other = await store.current_session(OTHER)
        await store.append_message(other.id, Message.user("group words"))
        return session.id, other.id
    finally:
        await store.close()


async def _current(database: Path, key: str) -> tuple[str, list[str]]:
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        session = await store.current_session(key)
        return session.id, [m.text for m in await store.list_messages(session.id)]
    finally:
        await store.close()


def test_an_operator_forks_a_chat_and_switches_it_back(
    in_process: CliRunner, tmp_path: Path
) -> None:
    database = tmp_path / "data" / "switchboard.db"
    original, other = asyncio.run(_two_chats(database))

    forked = invoke(in_process, ["sessions", "fork", "--chat", CHAT, "--name", "Beavers"])
    assert forked.exit_code == 0, forked.output
    fork, texts = asyncio.run(_current(database, CHAT))
    assert fork != original and texts == ["about otters", "otters hold hands"]
    assert forked.output.strip() == (
        f'Forked {original} (2 messages) into {fork} "beavers", '
        f"now the current conversation of {CHAT}."
    )

    listed = invoke(in_process, ["sessions", "list", "--chat", CHAT, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["id"], r["name"], r["current"], r["forked_from"]) for r in rows] == [
        (fork, "beavers", True, original),
        (original, None, False, None),
    ]
    table = invoke(in_process, ["sessions", "list", "--chat", CHAT]).output
    assert f"{fork} *" in table and "beavers" in table and other not in table

    switched = invoke(in_process, ["sessions", "switch", "--chat", CHAT, original[:6]])
    assert switched.exit_code == 0, switched.output
    assert switched.output.strip() == f"{CHAT} now continues {original} (2 messages)."
    assert asyncio.run(_current(database, CHAT))[0] == original
    assert invoke(in_process, ["sessions", "switch", "--chat", CHAT, "beavers"]).exit_code == 0
    assert asyncio.run(_current(database, CHAT))[0] == fork

    # Another chat's session is not this chat's to switch to.
    refused = invoke(in_process, ["sessions", "switch", "--chat", CHAT, other])
    assert isinstance(refused.exception, ConfigError)
    assert str(refused.exception) == (
        f"{CHAT} has no conversation {other!r} (see `sessions list --chat`)"
    )
    assert asyncio.run(_current(database, OTHER))[0] == other
    taken = invoke(in_process, ["sessions", "fork", "--chat", CHAT, "--name", "beavers"])
    assert str(taken.exception) == f"{CHAT} has a conversation named 'beavers' already"


def test_a_wrong_session_is_one_line_and_a_non_zero_exit(
    env: dict[str, str], tmp_path: Path
) -> None:
    asyncio.run(_two_chats(tmp_path / "data" / "switchboard.db"))

    done = subprocess.run(
        [str(SWITCHBOARD), "sessions", "switch", "--chat", CHAT, "nosuch"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )

    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == [
        f"switchboard: error: {CHAT} has no conversation 'nosuch' (see `sessions list --chat`)"
    ]


@pytest.mark.parametrize("command", [["sessions", "fork"], ["sessions", "switch"]])
def test_fork_and_switch_say_which_store_they_change_in_their_help(command: list[str]) -> None:
    shown = CliRunner().invoke(cli, [*command, "--help"])

    assert shown.exit_code == 0, shown.output
    assert "Reads the store at DATABASE_URL, else $SWITCHBOARD_DATA_DIR/switchboard.db" in (
        " ".join(shown.output.split())
    )
