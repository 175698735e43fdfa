"""`run_process`: the long-running processes' event loop, uvloop unless asked otherwise."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from bots.loop import run_process
from bots.settings import Settings
from core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def _module_of_the_loop() -> str:
    found = run_process(Settings(_env_file=None), _loop_module())
    assert found is not None  # None: stopped by SIGTERM
    return found


def test_uvloop_by_default_and_python_s_own_loop_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    assert _module_of_the_loop().startswith("uvloop")

    monkeypatch.setenv("SWITCHBOARD_EVENT_LOOP", "asyncio")
    assert _module_of_the_loop().startswith("asyncio")


def test_python_s_own_loop_where_uvloop_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import fails, as on Windows
    assert _module_of_the_loop().startswith("asyncio")


async def _leaves_a_task_whose_cancellation_starts_another() -> str:
    """Like a query left running when the database closed: cancelled, it starts a cleanup
    task (as SQLAlchemy does to close a connection) that waits for a reply that never comes."""
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def cleanup() -> None:
        await never

    async def query() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.ensure_future(cleanup()))
            raise

    started = asyncio.Event()

    async def run_query() -> None:
        started.set()
        await query()

    asyncio.get_running_loop().create_task(run_query(), name="left-behind")
    await started.wait()
    return "done"


def test_a_task_left_behind_does_not_keep_the_process_from_exiting() -> None:
    # In a process of its own: the loop installs signal handlers (main thread only), and a
    # loop that hangs is killed by the timeout instead of hanging the suite.
    script = (
        "import logging, sys\n"
        "from bots.loop import run_process\n"
        "from bots.settings import Settings\n"
        "from tests.unit.test_loop import _leaves_a_task_whose_cancellation_starts_another\n"
        "logging.basicConfig(stream=sys.stderr)\n"
        "print(run_process(Settings(_env_file=None), "
        "_leaves_a_task_whose_cancellation_starts_another()))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60.0,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("the event loop did not finish") from None
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr
    assert "tasks still running at exit, cancelled: left-behind" in done.stderr


async def _fail(error: Exception) -> None:
    await asyncio.sleep(0)
    raise error


def test_a_process_stopped_by_an_unexpected_error_logs_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(_env_file=None)
    with caplog.at_level("ERROR", logger="switchboard"), pytest.raises(AttributeError):
        run_process(settings, _fail(AttributeError("'NoneType' object has no attribute 'x'")))
    (record,) = caplog.records
    assert record.levelname == "ERROR" and record.exc_info is not None
    assert record.exc_info[0] is AttributeError

    # An error that says what is wrong stays the CLI's one line.
    caplog.clear()
    with caplog.at_level("ERROR", logger="switchboard"), pytest.raises(ConfigError):
        run_process(settings, _fail(ConfigError("DATABASE_URL names no database")))
    assert caplog.records == []
