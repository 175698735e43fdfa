"""`switchboard schedule` and scheduled runs under `switchboard serve`, as a user runs them.

Subprocesses with a clean environment (no keys, tokens, Redis or Switchboard settings of the
machine). The serve test talks to the Telegram Bot API fake and answers with the offline demo
provider; it is the one place where schedules fire on the real clock, so its waits are bounded
by a few seconds of schedule time plus the process's start.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from channels.terminal import NOTIFICATION_LABEL
from channels.terminal import SPEC as TERMINAL
from core.backends.sql.store import SqlStore
from core.envelopes import Address
from core.scheduling.book import ScheduleBook
from core.scheduling.models import OnceCadence, ScheduleRun
from tests.e2e.processes import communicate, open_profiles
from tests.e2e.served import serve
from tests.fakes.telegram_api import Call, FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")
# Starting `serve` imports python-telegram-bot and opens the database; only a broken start
# waits this long.
START_PATIENCE = 20.0
# A 2-second schedule on a 1-second scheduler tick: a run is due within 3 s; the rest is slack
# for a slow machine.
RUN_PATIENCE = 10.0
STOP_PATIENCE = 10.0
TARGET = 4242
DM = 555


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The machine's environment without credentials, Redis or Switchboard settings."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_TOKEN", "_API_KEY", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_"))
        and k != "REDIS_URL"
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        PTB_TIMEDELTA="1",
    )
    return keep


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def add_schedule(env: dict[str, str], cwd: Path, *timing: str, described: str = "every 10s") -> str:
    """Add the "what is 2+3?" schedule for chat 4242 (every 10 s unless `timing` says); its id."""
    added = run(
        [
            "schedule",
            "add",
            *(timing or ("--every", "10s")),
            "--prompt",
            "what is 2+3?",
            "--deliver-to",
            f"telegram:{TARGET}",
        ],
        env,
        cwd,
    )
    assert added.returncode == 0, added.stderr
    found = re.search(
        rf"Added schedule (\w+): {described}.*, delivered to telegram:4242", added.stdout
    )
    assert found, added.stdout
    return found.group(1)


def add_for_terminal(env: dict[str, str], cwd: Path) -> str:
    """A one-off "what is 2+3?" for the terminal, 1 s ahead (fired late rather than skipped)."""
    added = run(
        [
            "schedule",
            "add",
            *("--in", "1s", "--misfire", "run_once"),
            *("--prompt", "what is 2+3?", "--deliver-to", "terminal"),
        ],
        env,
        cwd,
    )
    assert added.returncode == 0, added.stderr
    found = re.search(r"Added schedule (\w+): once at .*, delivered to terminal;", added.stdout)
    assert found, added.stdout
    return found.group(1)


async def due_for_terminal(env: dict[str, str], *, late: timedelta) -> str:
    """A "what is 2+3?" reminder for the terminal, made an hour before its time and due `late`
    ago: its time came while no chat was open. Its id."""
    due = datetime.now(UTC) - late
    to = TERMINAL.address.bare
    assert to is not None
    database = Path(env["SWITCHBOARD_DATA_DIR"]) / "switchboard.db"
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        # Made with the defaults `schedule add --in` uses, at the time it was made.
        made = await ScheduleBook(store, clock=lambda: due - timedelta(hours=1)).create(
            cadence=OnceCadence(at=due),
            prompt="what is 2+3?",
            deliver_to=to,
            owner="cli",
        )
    finally:
        await store.close()
    return made.id


async def piped_chat(env: dict[str, str], cwd: Path, given: bytes) -> tuple[int, str, str]:
    """`switchboard chat` with `given` as its whole input: exit code, stdout, stderr."""
    chat = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    out, err = await communicate(chat, given, timeout=START_PATIENCE + RUN_PATIENCE + STOP_PATIENCE)
    assert chat.returncode is not None
    return chat.returncode, out.decode(), err.decode()


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# --- the schedule command -------------------------------------------------------------------


def test_added_schedule_is_listed(env: dict[str, str], tmp_path: Path) -> None:
    nothing = run(["schedule", "list"], env, tmp_path)
    assert nothing.returncode == 1
    assert "no data folder at " in nothing.stderr

    schedule_id = add_schedule(env, tmp_path)

    listed = run(["schedule", "list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(schedule_id)]
    for shown in ("every 10s", "telegram:4242", "always", "active", "what is 2+3?"):
        assert shown in row, row


def test_pause_resume_runs_and_remove(env: dict[str, str], tmp_path: Path) -> None:
    schedule_id = add_schedule(env, tmp_path)

    paused = run(["schedule", "pause", schedule_id], env, tmp_path)
    assert paused.returncode == 0, paused.stderr
    assert f"Schedule {schedule_id} is paused" in paused.stdout
    (row,) = [
        line
        for line in run(["schedule", "list"], env, tmp_path).stdout.splitlines()
        if line.startswith(schedule_id)
    ]
    # Paused: no next run is shown (it will not run then).
    assert " paused " in row and " - " in row, row

    resumed = run(["schedule", "resume", schedule_id], env, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Schedule {schedule_id} is active; next run " in resumed.stdout

    runs = run(["schedule", "runs", schedule_id], env, tmp_path)
    assert runs.returncode == 0, runs.stderr
    assert f"Schedule {schedule_id} has not run yet." in runs.stdout

    removed = run(["schedule", "remove", schedule_id], env, tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert f"Removed schedule {schedule_id}." in removed.stdout
    assert "No schedules." in run(["schedule", "list"], env, tmp_path).stdout


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--every", "soon"], "--every: 'soon' is not a duration"),
        (["--every", "0s"], "--every: '0s' is zero"),
        (["--every", "10s", "--deliver-to", "mail:x"], "--deliver-to: 'mail:x'"),
        (
            ["--every", "10s", "--deliver-to", "slack:general"],
            "expected slack:<channel or user id> like slack:C0123ABCD",
        ),
        (["--every", "2s"], "--every: runs would be 2 seconds apart; the shortest allowed is 10"),
        (["--every", "1h", "--tz", "Europe/Paris"], "--tz applies to --at and --cron only"),
        (["--every", "2s", "--cron", "0 9 * * *"], "exactly one of --at, --in, --every or --cron"),
        ([], "exactly one of --at, --in, --every or --cron"),
        (["--cron", "61 * * * *"], "--cron: '61 * * * *' is not a valid cron expression"),
        (["--at", "2020-01-01T09:00"], "--at: '2020-01-01T09:00'"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Base"], "'Mars/Base'"),
        (["--at", "2099-01-01T09:00", "--tz", "Mars/Base"], "'Mars/Base'"),
        (["--every", "2s", "--tz", "Mars/Base"], "--tz: unknown timezone 'Mars/Base'"),
        (["--at", "the day after soon"], "--at: 'the day after soon' is not a time"),
        (["--in", "a while"], "--in: 'a while' is not a duration"),
        (["--at", "yesterday"], "--at: 'yesterday' ("),
        (["--in", "1h", "--grace", "soon"], "--grace: 'soon' is not a duration"),
        (
            ["--in", "1h", "--misfire", "skip", "--grace", "1h"],
            "--grace applies to --misfire run_once",
        ),
    ],
)
def test_a_schedule_that_cannot_run_is_refused_in_one_line(
    env: dict[str, str], tmp_path: Path, options: list[str], needle: str
) -> None:
    if "--deliver-to" not in options:
        options = [*options, "--deliver-to", f"telegram:{TARGET}"]

    refused = run(["schedule", "add", "--prompt", "what is 2+3?", *options], env, tmp_path)

    assert_one_line_error(refused, needle)
    assert not (tmp_path / "data").exists()  # nothing stored, not even an empty store


@pytest.mark.parametrize(
    ("options", "described"),
    [
        (["--every", "90m"], "every 90m"),
        (["--every", "1.5 hours"], "every 90m"),
        (["--in", "2h"], "once at "),
        (["--in", "2h", "--grace", "2h"], "once at "),
        (["--every", "1h", "--grace", "10m"], "every 1h"),
        (["--at", "tomorrow 9:00", "--tz", "Europe/Paris"], "once at "),
    ],
)
def test_what_people_type_for_a_time_is_understood(
    env: dict[str, str], tmp_path: Path, options: list[str], described: str
) -> None:
    added = run(
        ["schedule", "add", "--prompt", "stretch", "--deliver-to", "terminal", *options],
        env,
        tmp_path,
    )

    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("Added schedule ")
    assert described in added.stdout
    assert added.stderr == ""


async def _empty_store(path: Path) -> None:
    """The store a bot that has run leaves behind, with no schedule in it."""
    from core.backends.sql.store import SqlStore

    await (await SqlStore.open(f"sqlite:///{path}")).close()


@pytest.mark.parametrize("command", ["pause", "resume", "remove", "runs"])
def test_an_unknown_schedule_id_is_one_line_and_exit_1(
    env: dict[str, str], tmp_path: Path, command: str
) -> None:
    asyncio.run(_empty_store(tmp_path / "data" / "switchboard.db"))
    result = run(["schedule", command, "nope"], env, tmp_path)

    assert result.returncode == 1
    assert_one_line_error(result, "no schedule 'nope'")


# Longer than any table cell, with text that looks like markup: printed whole and as it is.
LONG_OUTPUT = "".join(f"[bold]line {i:04d}[/bold] of the report\n" for i in range(300)) + "END"


async def _runs_of_a_schedule(path: Path) -> str:
    """A schedule with a long succeeded run and a failed one after it; its id."""
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        made = await ScheduleBook(store).create(
            cadence=OnceCadence(at=datetime.now(UTC) + timedelta(hours=1)),
            prompt="the report",
            deliver_to=Address(platform="telegram", chat=str(TARGET)),
            owner="cli",
        )
        started = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
        for run_id, at, update in (
            ("run-long", started, {"status": "succeeded", "output": LONG_OUTPUT}),
            ("run-failed", started + timedelta(hours=1), {"status": "failed", "error": "down"}),
        ):
            await store.save_run(
                ScheduleRun(id=run_id, schedule_id=made.id, due_at=at, started_at=at, **update)
            )
    finally:
        await store.close()
    return made.id


def test_schedule_runs_full_prints_each_runs_whole_output(
    env: dict[str, str], tmp_path: Path
) -> None:
    schedule_id = asyncio.run(_runs_of_a_schedule(tmp_path / "data" / "switchboard.db"))

    table = run(["schedule", "runs", schedule_id], env, tmp_path)
    assert table.returncode == 0, table.stderr
    assert "END" not in table.stdout  # the table shows 80 characters

    full = run(["schedule", "runs", schedule_id, "--full"], env, tmp_path)
    assert full.returncode == 0, full.stderr
    failed, long = full.stdout.split("\n\n")[:2]
    assert failed == (
        "== run run-failed, 2026-05-01 10:00:00 UTC: failed, delivered: no\nerror: down"
    )
    assert (
        long == f"== run run-long, 2026-05-01 09:00:00 UTC: succeeded, delivered: no\n{LONG_OUTPUT}"
    )

    latest = run(["schedule", "runs", schedule_id, "--full", "--limit", "1"], env, tmp_path)
    assert "run-failed" in latest.stdout and "run-long" not in latest.stdout

    both = run(["schedule", "runs", schedule_id, "--full", "--json"], env, tmp_path)
    assert_one_line_error(both, "--full and --json cannot go together")
    unknown = run(["schedule", "runs", "nope", "--full"], env, tmp_path)
    assert unknown.returncode == 1
    assert_one_line_error(unknown, "no schedule 'nope'")


def test_the_scheduler_process_alone_needs_redis(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["scheduler"], env, tmp_path)

    assert result.returncode == 1
    assert_one_line_error(result, "`switchboard scheduler` needs REDIS_URL", "switchboard serve")


# --- fired by `switchboard serve` ----------------------------------------------------------


def to_chat(chat_id: int) -> Callable[[Call], bool]:
    """A `wait_for_call` predicate: the call is about `chat_id`."""
    return lambda call: call.params.get("chat_id") == chat_id


async def test_serve_fires_schedules_and_reminders_into_telegram(
    fake_telegram: FakeTelegram, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    # Two one-off runs, 2 and 3 s ahead (repeating ones may not run closer than 10 s apart);
    # `run_once`: a slow start of `serve` still fires them.
    first_id, second_id = [
        await asyncio.to_thread(
            add_schedule,
            env,
            tmp_path,
            "--in",
            after,
            "--misfire",
            "run_once",
            described="once at ",
        )
        for after in ("2s", "3s")
    ]
    # A terminal's schedule is for `switchboard chat`: serve leaves it due.
    for_terminal = await asyncio.to_thread(add_for_terminal, env, tmp_path)
    env.update(
        TELEGRAM_BOT_TOKEN=fake.token,
        TELEGRAM_API_URL=fake.url,
        SWITCHBOARD_PROVIDER="demo",
        SWITCHBOARD_LOG_LEVEL="info",
    )

    async with serve(env, tmp_path) as served:
        await served.unless_exited(
            asyncio.ensure_future(fake.wait_idle_poll(timeout=START_PATIENCE))
        )

        # Nobody writes in chat 4242: the schedules' answers come on their own.
        first = asyncio.ensure_future(
            fake.wait_for_call("sendMessage", to_chat(TARGET), timeout=RUN_PATIENCE)
        )
        await served.unless_exited(first)
        second = asyncio.ensure_future(
            fake.wait_for_call(
                "sendMessage",
                to_chat(TARGET),
                timeout=RUN_PATIENCE,
                after=first.result().index + 1,
            )
        )
        await served.unless_exited(second)
        answers = fake.sent_texts(TARGET)
        assert len(answers) >= 2, served.log
        assert all("The answer is 5" in text for text in answers[:2]), answers

        # A reminder asked for in a private chat arrives there, after the confirmation.
        fake.private_text(DM, "remind me in 2 seconds to stretch")
        confirmation = await reply_containing(fake, DM, "Scheduled", timeout=RUN_PATIENCE)
        assert "stretch" not in confirmation.text
        reminder = await reply_containing(fake, DM, "stretch", timeout=RUN_PATIENCE)
        assert "Reminder: stretch" in reminder.text

        assert await served.terminate(STOP_PATIENCE) == 0

    assert "Traceback" not in served.log, served.log
    for schedule_id in (first_id, second_id):
        assert f"schedule {schedule_id} fired" in served.log
        runs = await asyncio.to_thread(run, ["schedule", "runs", schedule_id], env, tmp_path)
        assert runs.returncode == 0, runs.stderr
        succeeded = [line for line in runs.stdout.splitlines() if " succeeded " in line]
        assert len(succeeded) == 1, runs.stdout
        assert " yes " in succeeded[0], runs.stdout
    untouched = await asyncio.to_thread(run, ["schedule", "runs", for_terminal], env, tmp_path)
    assert f"Schedule {for_terminal} has not run yet." in untouched.stdout, untouched.stdout
    listed = await asyncio.to_thread(run, ["schedule", "list"], env, tmp_path)
    reminder_rows = [line for line in listed.stdout.splitlines() if "Reminder: stretch" in line]
    assert len(reminder_rows) == 1 and " completed " in reminder_rows[0], listed.stdout


# --- fired by `switchboard chat` ------------------------------------------------------------


async def test_a_piped_chat_shows_terminal_schedules_and_leaves_the_others(
    env: dict[str, str], tmp_path: Path
) -> None:
    for_terminal = await asyncio.to_thread(add_for_terminal, env, tmp_path)
    for_telegram = await asyncio.to_thread(
        add_schedule, env, tmp_path, "--in", "1s", "--misfire", "run_once", described="once at "
    )
    env["SWITCHBOARD_PROVIDER"] = "demo"
    chat = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    # Input stays open until the scheduled block has been shown: the chat keeps running.
    chat.stdin.write(b"what is 6*7?\n")
    await chat.stdin.drain()
    lines: list[str] = []
    try:
        async with asyncio.timeout(START_PATIENCE + RUN_PATIENCE):
            while not (_block(lines) and any("answer is 42" in line for line in lines)):
                line = await chat.stdout.readline()
                assert line, f"chat ended early: {lines}"
                lines.append(line.decode().rstrip("\n"))
    finally:
        chat.stdin.close()
        _, errors = await communicate(chat, timeout=STOP_PATIENCE)
    assert chat.returncode == 0, errors.decode()

    # The scheduled answer is one labelled block, not mixed with the chat's own answer.
    block = _block(lines)
    assert "answer is 42" not in "\n".join(block), lines
    assert lines.count(NOTIFICATION_LABEL) == 1, lines

    ran = await asyncio.to_thread(run, ["schedule", "runs", for_terminal], env, tmp_path)
    assert " succeeded " in ran.stdout, ran.stdout
    left = await asyncio.to_thread(run, ["schedule", "runs", for_telegram], env, tmp_path)
    assert f"Schedule {for_telegram} has not run yet." in left.stdout, left.stdout


def _block(lines: list[str]) -> list[str]:
    """The lines from the scheduled-message label to the scheduled answer (2+3); [] if none."""
    if NOTIFICATION_LABEL not in lines:
        return []
    start = lines.index(NOTIFICATION_LABEL)
    ends = [n for n, line in enumerate(lines) if n > start and "answer is 5" in line]
    return lines[start : ends[0] + 1] if ends else []


async def test_a_reminder_due_while_no_chat_was_open_is_shown_when_the_next_chat_opens(
    env: dict[str, str], tmp_path: Path
) -> None:
    reminder = await due_for_terminal(env, late=timedelta(minutes=12))
    env["SWITCHBOARD_PROVIDER"] = "demo"
    chat = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        "chat",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    # Input stays open until the reminder has been shown.
    lines: list[str] = []
    try:
        async with asyncio.timeout(START_PATIENCE + RUN_PATIENCE):
            while not _block(lines):
                line = await chat.stdout.readline()
                assert line, f"chat ended early: {lines}"
                lines.append(line.decode().rstrip("\n"))
    finally:
        chat.stdin.close()
        _, errors = await communicate(chat, timeout=STOP_PATIENCE)
    assert chat.returncode == 0, errors.decode()

    # Run late rather than skipped, and the answer says when it was due.
    block = _block(lines)
    assert re.fullmatch(r"\(due at \d\d:\d\d UTC, 1[23] minutes ago\)", block[1]), block
    ran = await asyncio.to_thread(run, ["schedule", "runs", reminder], env, tmp_path)
    assert " succeeded " in ran.stdout, ran.stdout
    assert f"Schedule {reminder} is completed" in ran.stdout, ran.stdout


async def test_a_short_piped_chat_waits_for_a_due_reminder_and_prints_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    reminder = await due_for_terminal(env, late=timedelta(minutes=2))
    env["SWITCHBOARD_PROVIDER"] = "demo"

    # `echo 'what is 6*7?' | switchboard chat`: the input ends at once.
    code, out, err = await piped_chat(env, tmp_path, b"what is 6*7?\n")

    assert code == 0, err
    lines = out.splitlines()
    assert any("answer is 42" in line for line in lines), out
    assert _block(lines), out
    ran = await asyncio.to_thread(run, ["schedule", "runs", reminder], env, tmp_path)
    (row,) = [line for line in ran.stdout.splitlines() if " succeeded " in line]
    assert " yes " in row, ran.stdout  # delivered, not `pending` for good


async def test_a_chat_with_no_input_still_shows_a_due_reminder(
    env: dict[str, str], tmp_path: Path
) -> None:
    reminder = await due_for_terminal(env, late=timedelta(minutes=2))
    env["SWITCHBOARD_PROVIDER"] = "demo"

    code, out, err = await piped_chat(env, tmp_path, b"")

    assert code == 0, err
    assert _block(out.splitlines()), out
    ran = await asyncio.to_thread(run, ["schedule", "runs", reminder], env, tmp_path)
    (row,) = [line for line in ran.stdout.splitlines() if " succeeded " in line]
    assert " yes " in row, ran.stdout


async def test_schedule_runs_says_why_a_reminder_did_not_run(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Due over a day ago, past the grace of a one-off.
    too_late = await due_for_terminal(env, late=timedelta(hours=25))
    waiting = await due_for_terminal(env, late=timedelta(minutes=5))

    # Nothing has fired them yet: no chat was opened since.
    before = await asyncio.to_thread(run, ["schedule", "runs", waiting], env, tmp_path)
    assert f"Schedule {waiting} has not run yet. It was due at " in before.stdout, before.stdout
    assert "runs when `switchboard chat` opens" in before.stdout, before.stdout
    pausing = await asyncio.to_thread(run, ["schedule", "pause", waiting], env, tmp_path)
    assert pausing.returncode == 0, pausing.stderr
    paused = await asyncio.to_thread(run, ["schedule", "runs", waiting], env, tmp_path)
    assert f"Schedule {waiting} is paused" in paused.stdout, paused.stdout

    env["SWITCHBOARD_PROVIDER"] = "demo"
    code, out, err = await piped_chat(env, tmp_path, b"")
    assert code == 0, err
    assert NOTIFICATION_LABEL not in out, out  # the paused one stays paused, the other missed

    missed = await asyncio.to_thread(run, ["schedule", "runs", too_late], env, tmp_path)
    (row,) = [line for line in missed.stdout.splitlines() if " missed " in line]
    assert "25 hours late, past the 24 hours grace" in row, missed.stdout
    assert f"Schedule {too_late} is disabled (its run was missed: due " in missed.stdout
