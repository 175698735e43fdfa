"""The commands an operator reaches for, as a subprocess: `sessions delete` (asking first at a
terminal, `--yes` otherwise), and every store-reading command saying which store it read."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bots.cli import cli
from core.errors import ConfigError
from core.messages import Message
from core.store import SqliteStore
from tests.redis_server import RedisServer

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


def run(
    args: list[str], env: dict[str, str], cwd: Path, *, tty_answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`switchboard ARGS`; with `tty_answer`, stdin is a terminal that answers the question."""
    if tty_answer is None:
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
    master, slave = os.openpty()
    try:
        os.write(master, tty_answer.encode())
        return subprocess.run(
            [str(SWITCHBOARD), *args],
            stdin=slave,
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=60,
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)


@pytest.fixture
def in_process(env: dict[str, str]) -> Iterator[CliRunner]:
    """A runner of the CLI in this process (quicker than a subprocess), the logging set-up it
    makes undone afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield CliRunner(env=env)
    root.handlers[:], level = saved
    root.setLevel(level)


def invoke(runner: CliRunner, args: list[str]) -> Result:
    return runner.invoke(cli, args, catch_exceptions=True)


async def _sessions(database: Path) -> list[str]:
    store = await SqliteStore.open(database)
    try:
        return [record.id for record in await store.list_sessions()]
    finally:
        await store.close()


async def _conversation(database: Path) -> str:
    store = await SqliteStore.open(database)
    try:
        session = await store.current_session("telegram:1:42")
        await store.append_message(session.id, Message.user("a secret to forget"))
        await store.append_message(session.id, Message.assistant("noted"))
        return session.id
    finally:
        await store.close()


def test_sessions_delete_asks_first_at_a_terminal_and_takes_no_for_an_answer(
    env: dict[str, str], tmp_path: Path
) -> None:
    database = tmp_path / "data" / "switchboard.db"
    session_id = asyncio.run(_conversation(database))
    what = f"session {session_id} (telegram:1:42, 2 messages)"

    refused = run(["sessions", "delete", session_id], env, tmp_path)
    assert refused.returncode == 1, refused
    assert refused.stderr.strip().splitlines() == [
        f"switchboard: error: not deleting {what} without asking: pass --yes"
    ]

    kept = run(["sessions", "delete", session_id], env, tmp_path, tty_answer="n\n")
    assert kept.returncode == 0, kept
    assert f"Delete {what} from {database}?" in kept.stdout
    assert "Nothing deleted." in kept.stdout
    assert asyncio.run(_sessions(database)) == [session_id]

    deleted = run(["sessions", "delete", session_id], env, tmp_path, tty_answer="y\n")
    assert deleted.returncode == 0, deleted
    assert f"Deleted {what} from {database}." in deleted.stdout
    assert asyncio.run(_sessions(database)) == []


def test_sessions_delete_with_yes_does_not_ask(in_process: CliRunner, tmp_path: Path) -> None:
    database = tmp_path / "data" / "switchboard.db"
    session_id = asyncio.run(_conversation(database))

    deleted = invoke(in_process, ["sessions", "delete", "--yes", session_id])
    assert deleted.exit_code == 0, deleted.output
    assert asyncio.run(_sessions(database)) == []

    again = invoke(in_process, ["sessions", "delete", "--yes", session_id])
    assert isinstance(again.exception, ConfigError)
    assert str(again.exception) == (
        f"no session {session_id!r} in {database} (see `sessions list`)"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "delete"],
        ["sessions", "export"],
        ["cost"],
        ["schedule", "list"],
        ["memory", "list"],
        ["recover"],
        ["status"],
    ],
)
def test_commands_that_read_the_store_say_which_in_their_help(command: list[str]) -> None:
    shown = CliRunner().invoke(cli, [*command, "--help"])

    assert shown.exit_code == 0, shown.output
    assert "Reads the store at $SWITCHBOARD_DATA_DIR/switchboard.db" in shown.output
    assert "or Redis when REDIS_URL is set" in " ".join(shown.output.split())


def test_empty_answers_name_the_store(in_process: CliRunner, tmp_path: Path) -> None:
    database = tmp_path / "data" / "switchboard.db"
    asyncio.run(_sessions(database))  # an empty store, as a first `serve` leaves it

    schedules = invoke(in_process, ["schedule", "list"]).output
    assert schedules.startswith(f"No schedules. The store is {database}; add one"), schedules
    spent = invoke(in_process, ["cost"]).output
    assert spent.strip().endswith(f"The store is {database}."), spent
    sessions = " ".join(invoke(in_process, ["sessions", "list"]).output.split())
    assert sessions == (
        f"No conversations yet. The store is {database}; start one with: switchboard chat"
    )


async def _a_worker_and_a_message(url: str, bot: str) -> None:
    from core.bus.names import INBOUND
    from core.bus.redis import RedisBus
    from core.clock import utc_now
    from core.envelopes import Address, Inbound
    from core.heartbeat import ProcessInfo, RedisHeartbeats
    from core.redis_keys import RedisKeys

    keys = RedisKeys(bot)
    board = RedisHeartbeats.from_url(url, keys)
    now = utc_now()
    await board.beat(
        ProcessInfo(
            id="worker-1",
            role="worker",
            host="box-2",
            pid=877,
            version="0.1.0",
            started_at=now,
            seen_at=now,
        )
    )
    await board.aclose()
    bus = await RedisBus.connect(url, keys=keys)
    await bus.enqueue(INBOUND, Inbound(address=Address(platform="telegram", chat="1"), text="hi"))
    await bus.close()


def test_status_on_redis_lists_the_processes_and_the_queues(
    in_process: CliRunner, redis_server: RedisServer
) -> None:
    bot = f"status{uuid.uuid4().hex[:8]}"
    asyncio.run(_a_worker_and_a_message(redis_server.url, bot))
    in_process.env = {**(in_process.env or {}), "REDIS_URL": redis_server.url}
    in_process.env["SWITCHBOARD_BOT_ID"] = bot

    shown = invoke(in_process, ["status"])

    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith("Processes using Redis at 127.0.0.1:"), shown.output
    assert lines[0].endswith(f"(bot {bot}):"), shown.output
    assert lines[1].split()[:3] == ["worker", "ok", "box-2:877"], shown.output
    assert "inbound              1 waiting, oldest " in shown.output
    assert "outbound.telegram    0 waiting, 0 dead" in shown.output


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "show", "alpha"],
        ["sessions", "export", "alpha"],
        ["sessions", "delete", "--yes", "alpha"],
        ["cost"],
        ["cost", "--by", "day"],
        ["memory", "list", "terminal:local"],
        ["schedule", "list"],
        ["schedule", "runs", "s1"],
        ["schedule", "pause", "s1"],
        ["pairing", "list"],
        ["deadletters", "list"],
        ["recover"],
        ["status"],
    ],
)
def test_reading_commands_refuse_a_data_folder_that_is_not_there(
    env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    env["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "dat")  # a typo of "data"

    shown = run(command, env, tmp_path)

    assert shown.returncode == 1, shown
    assert shown.stderr.strip().splitlines() == [
        f"switchboard: error: no data folder at {tmp_path / 'dat'}: check SWITCHBOARD_DATA_DIR, "
        "or start with `switchboard chat` (or `switchboard serve`), which make it"
    ]
    assert not (tmp_path / "dat").exists()


def test_health_without_its_data_folder_is_unhealthy(env: dict[str, str], tmp_path: Path) -> None:
    env["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "dat")

    shown = run(["health"], env, tmp_path)

    assert shown.returncode == 1, shown
    assert shown.stderr.startswith(f"not ok: no data folder at {tmp_path / 'dat'}: "), shown
    assert not (tmp_path / "dat").exists()


def test_a_data_folder_without_the_store_is_named_too(
    in_process: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()

    shown = invoke(in_process, ["sessions", "list"])

    assert isinstance(shown.exception, ConfigError)
    assert str(shown.exception).startswith(f"no store at {tmp_path / 'data' / 'switchboard.db'}: ")
    assert list((tmp_path / "data").iterdir()) == []
