"""The commands an operator reaches for, as a subprocess: `sessions delete` (asking first at a
terminal, `--yes` otherwise), and every store-reading command saying which store it read."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bots.cli import cli
from core.backends.sql.store import SqlStore
from core.errors import ConfigError
from core.messages import Message
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
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        return [record.id for record in await store.list_sessions()]
    finally:
        await store.close()


async def _conversation(database: Path) -> str:
    store = await SqlStore.open(f"sqlite:///{database}")
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


async def _a_gateway_with_a_deaf_platform(url: str, bot: str) -> None:
    from core.backends.redis.keys import RedisKeys
    from core.clock import utc_now
    from core.heartbeat import ProcessInfo, RedisHeartbeats
    from core.watchdog import PlatformHealth

    board = RedisHeartbeats.from_url(url, RedisKeys(bot))
    now = utc_now()
    deaf = PlatformHealth(
        platform="telegram",
        since_update=1900,
        since_delivery=1850,
        poll_lag=1900,
        failure_rate=0.25,
        threshold=1800,
        incident="no poll has succeeded for 31 min",
    )
    info = ProcessInfo(
        id="gateway-1",
        role="gateway",
        host="box-3",
        pid=901,
        version="0.1.0",
        started_at=now,
        seen_at=now,
        detail="telegram",
        platforms=[deaf],
    )
    await board.beat(info)
    await board.aclose()


def test_status_shows_what_the_watchdog_sees_of_each_platform(
    in_process: CliRunner, redis_server: RedisServer
) -> None:
    bot = f"watch{uuid.uuid4().hex[:8]}"
    asyncio.run(_a_gateway_with_a_deaf_platform(redis_server.url, bot))
    in_process.env = {**(in_process.env or {}), "REDIS_URL": redis_server.url}
    in_process.env["SWITCHBOARD_BOT_ID"] = bot

    shown = invoke(in_process, ["status"])
    as_json = invoke(in_process, ["status", "--json"])

    assert shown.exit_code == 0, shown.output
    assert (
        "    telegram   SILENT, update 1900s ago, delivery 1850s ago, poll 1900s ago, "
        "failing 25% (no poll has succeeded for 31 min)"
    ) in shown.output.splitlines(), shown.output
    [process] = json.loads(as_json.output)["processes"]
    [platform] = process["platforms"]
    assert (platform["platform"], platform["poll_lag"]) == ("telegram", 1900)
    assert platform["incident"] == "no poll has succeeded for 31 min"


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
        ["takeover"],
        ["handback"],
    ],
)
def test_commands_that_read_the_store_say_which_in_their_help(command: list[str]) -> None:
    shown = CliRunner().invoke(cli, [*command, "--help"])

    assert shown.exit_code == 0, shown.output
    assert "Reads the store at DATABASE_URL, else $SWITCHBOARD_DATA_DIR/switchboard.db" in (
        " ".join(shown.output.split())
    )


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
    from core.backends.redis.keys import RedisKeys
    from core.backends.redis.mailboxes import RedisMailboxes
    from core.clock import utc_now
    from core.envelopes import Address, Inbound
    from core.heartbeat import ProcessInfo, RedisHeartbeats

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
    mailboxes = RedisMailboxes.from_url(url, keys=keys)
    await mailboxes.put(Inbound(address=Address(platform="telegram", chat="1"), text="hi"))
    await mailboxes.aclose()


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
    assert "mailboxes            1 waiting" in shown.output
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


LONG_PROMPT = "Summarise the overnight alerts from the monitoring channel, worst first, please"


async def _a_busy_store(database: Path) -> dict[str, str]:
    """A store with something in every list: a session that cost something (and a call with no
    known price), a schedule, a fact, a pairing request and an approval; their ids."""
    from datetime import UTC, datetime

    from core.access import Pairing
    from core.envelopes import Address, Inbound
    from core.facts import MemoryFact, memory_scope
    from core.messages import Usage
    from core.scheduling.book import ScheduleBook
    from core.scheduling.models import IntervalCadence
    from core.store import CostEntry

    now = datetime.now(UTC)
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        session = await store.current_session("telegram:default:-1001234567890")
        await store.append_message(session.id, Message.user("how are the alerts?"))
        for cost in (0.0123, None):
            await store.record_cost(
                CostEntry(
                    session_id=session.id,
                    run_id="r1",
                    provider="anthropic",
                    model="claude-sonnet-4-6",
                    usage=Usage(input_tokens=1_234_567, output_tokens=89_012),
                    cost_usd=cost,
                    at=now,
                    user="telegram:123456789",
                    chat="telegram:default:-1001234567890",
                )
            )
        made = await ScheduleBook(store).create(
            cadence=IntervalCadence(seconds=3600, start=now),
            prompt=LONG_PROMPT,
            deliver_to=Address(platform="telegram", chat="-1001234567890"),
            owner="cli",
            notify="conditional",
        )
        fact = MemoryFact.new(
            memory_scope("default", "telegram", "123456789"), "likes short answers", now=now
        )
        await store.remember_fact(fact)
        pairing = Pairing(store)
        for user in ("555000111", "555000222"):
            address = Address(platform="telegram", bot="b", chat=user)
            await pairing.request(
                Inbound(address=address, user_id=user, user_name="Ada Lovelace", is_direct=True)
            )
        [first, _] = await pairing.pending("telegram")
        await pairing.approve("telegram", first.code, admin=False, by="cli")
        [request] = await pairing.pending("telegram")
        return {"session": session.id, "schedule": made.id, "fact": fact.id, "code": request.code}
    finally:
        await store.close()


def _narrow(runner: CliRunner, args: list[str]) -> str:
    runner.env = {**(runner.env or {}), "COLUMNS": "80"}
    shown = invoke(runner, args)
    assert shown.exit_code == 0, shown.output
    assert all(len(line) <= 80 for line in shown.output.splitlines()), shown.output
    return shown.output


def test_at_80_columns_ids_and_dates_are_whole(in_process: CliRunner, tmp_path: Path) -> None:
    ids = asyncio.run(_a_busy_store(tmp_path / "data" / "switchboard.db"))

    schedules = _narrow(in_process, ["schedule", "list"])
    [row] = [line for line in schedules.splitlines() if line.startswith(ids["schedule"] + " ")]
    assert re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", row), schedules  # next run, whole
    costs = _narrow(in_process, ["cost"])
    assert re.search(rf"^{ids['session']} ", costs, re.MULTILINE), costs
    assert "2,469,134" in costs and "+ unknown" in costs
    sessions = _narrow(in_process, ["sessions", "list"])
    assert re.search(
        rf"^{ids['session']} .* \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d$", sessions, re.MULTILINE
    ), sessions
    by_user = _narrow(in_process, ["cost", "--by", "user"])
    assert re.search(r"^telegram:123456789 ", by_user, re.MULTILINE), by_user
    by_day = _narrow(in_process, ["cost", "--by", "day"])
    assert re.search(r"^\d{4}-\d\d-\d\d ", by_day, re.MULTILINE), by_day
    facts = _narrow(in_process, ["memory", "list", "telegram:123456789"])
    assert re.search(rf"^{ids['fact']} \d{{4}}-\d\d-\d\d \d\d:\d\d ", facts, re.MULTILINE)
    pairing = _narrow(in_process, ["pairing", "list"])
    assert re.search(rf"^telegram +{ids['code']} +555000222 ", pairing, re.MULTILINE), pairing
    assert re.search(r"^telegram +555000111 ", pairing, re.MULTILINE), pairing


def test_every_list_command_prints_json(in_process: CliRunner, tmp_path: Path) -> None:
    ids = asyncio.run(_a_busy_store(tmp_path / "data" / "switchboard.db"))

    def listed(*args: str) -> Any:
        shown = invoke(in_process, [*args, "--json"])
        assert shown.exit_code == 0, shown.output
        return json.loads(shown.output)

    [session] = listed("sessions", "list")
    assert session["id"] == ids["session"]
    assert session["key"] == "telegram:default:-1001234567890"
    [schedule] = listed("schedule", "list")
    assert (schedule["id"], schedule["prompt"]) == (ids["schedule"], LONG_PROMPT)
    assert schedule["next_run_at"].endswith("Z") or "+00:00" in schedule["next_run_at"]
    assert listed("schedule", "runs", ids["schedule"]) == []
    spent = listed("cost")
    assert isinstance(spent, dict)
    assert [s["session_id"] for s in spent["sessions"]] == [ids["session"]]
    assert spent["total"]["unpriced_calls"] == 1
    by_day = listed("cost", "--by", "day")
    assert isinstance(by_day, dict) and by_day["by"] == "day" and len(by_day["rows"]) == 1
    access = listed("pairing", "list")
    assert isinstance(access, dict)
    assert [r["code"] for r in access["pending"]] == [ids["code"]]
    assert [a["user_id"] for a in access["approved"]] == ["555000111"]
    assert listed("deadletters", "list") == []
    [fact] = listed("memory", "list", "telegram:123456789")
    assert (fact["id"], fact["text"]) == (ids["fact"], "likes short answers")
    status = listed("status")
    assert isinstance(status, dict)
    assert status["processes"] == [] and status["mailboxes"]["waiting"] == 0


def test_stored_text_that_looks_like_markup_is_shown_as_it_is(
    in_process: CliRunner, tmp_path: Path
) -> None:
    prompt = "[/oops] tell me [bold]now[/bold]"
    added = invoke(
        in_process,
        ["schedule", "add", "--every", "1h", "--prompt", prompt, "--deliver-to", "terminal"],
    )
    assert added.exit_code == 0, added.output

    listed = invoke(in_process, ["schedule", "list"])

    assert listed.exit_code == 0, listed.output
    assert prompt in listed.output
