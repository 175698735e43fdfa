"""`run_process`: the event loop a long-running process (`serve`, `gateway`, `worker`,
`scheduler`) runs on.

uvloop (libuv's loop, written in C) by default: a process handling many small Redis commands
and HTTP calls spends noticeably less CPU in the loop's own machinery on it (docs/performance.md,
W3). `SWITCHBOARD_EVENT_LOOP=asyncio` keeps Python's own loop, and so does a machine without
uvloop (it is not installed on Windows). The short commands (`chat`, `status`, ...) stay on
Python's loop: importing uvloop would only add to their start.

`stop_on_sigterm` covers the time before a process installs its graceful SIGTERM handler
(`on_signals`), and the whole of a process that has none (`chat`): SIGTERM cancels the main
task, so what it started (MCP servers above all) is stopped on the way out instead of the
process dying at once and leaving them running.

Every task a process starts should be awaited before `main` returns. One that is not, and that
starts a cleanup task of its own when cancelled (SQLAlchemy closes a connection that way), would
keep `asyncio.run` waiting forever: it cancels the tasks it finds once, and the cleanup task,
born after, waits on a database connection that is already gone. So `stop_on_sigterm` cancels
what is left, again and again while cancelling it starts more, and names it in a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click

from bots.settings import Settings
from bots.tracing import traced

__all__ = ["loop_factory", "run_process", "stop_on_sigterm"]

T = TypeVar("T")

# Rounds of cancelling tasks left behind; each round also takes the tasks the last one started,
# after waiting at most `_LEFTOVER_WAIT` seconds for the ones it cancelled.
_LEFTOVER_ROUNDS = 10
_LEFTOVER_WAIT = 1.0

log = logging.getLogger("switchboard")


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the loop the settings ask for; None for Python's own."""
    if settings.event_loop != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_process(
    settings: Settings, main: Coroutine[Any, Any, T], *, role: str = "process"
) -> T | None:
    """`asyncio.run(stop_on_sigterm(main))`, on the loop the settings ask for.

    A process stopped by an error nobody expected logs its traceback at ERROR before the CLI
    prints its one line: the log is all an operator has of a worker that stopped at night.
    Errors that say what is wrong (`SwitchboardError`, a usage error) stay one line.
    `role` (`serve`, `gateway telegram`, ...) names the process in its traces
    (`bots/tracing.py`)."""
    from core.errors import SwitchboardError

    with contextlib.ExitStack() as process:
        try:
            process.enter_context(traced(role))
        except SwitchboardError:
            main.close()  # never started: no "coroutine was never awaited" at exit
            raise
        runner = process.enter_context(asyncio.Runner(loop_factory=loop_factory(settings)))
        try:
            return runner.run(stop_on_sigterm(main))
        except (SwitchboardError, click.ClickException):
            raise
        except Exception:
            log.exception("the process stopped on an unexpected error")
            raise


async def stop_on_sigterm(main: Coroutine[Any, Any, T]) -> T | None:
    """Run `main`; a SIGTERM before it installs a handler of its own cancels it (what it
    started is closed as it unwinds) and the result is None."""
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def cancel() -> None:
        nonlocal terminated
        if not terminated:
            terminated = True
            log.warning("stopping")
            task.cancel()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, cancel)
    try:
        return await main
    except asyncio.CancelledError:
        if not terminated:
            raise
        return None
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
        await _cancel_leftovers(task)


async def _cancel_leftovers(main: asyncio.Task[Any]) -> None:
    """Cancel and await the tasks still running besides `main`, including those their
    cancellation starts."""
    for _ in range(_LEFTOVER_ROUNDS):
        left = [t for t in asyncio.all_tasks() if t is not main and not t.done()]
        if not left:
            return
        log.warning(
            "tasks still running at exit, cancelled: %s", ", ".join(t.get_name() for t in left)
        )
        for leftover in left:
            leftover.cancel()
        await asyncio.wait(left, timeout=_LEFTOVER_WAIT)
