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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from bots.settings import Settings

__all__ = ["loop_factory", "run_process", "stop_on_sigterm"]

T = TypeVar("T")

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


def run_process(settings: Settings, main: Coroutine[Any, Any, T]) -> T | None:
    """`asyncio.run(stop_on_sigterm(main))`, on the loop the settings ask for."""
    with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
        return runner.run(stop_on_sigterm(main))


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
