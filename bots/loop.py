"""`run_process`: the event loop a long-running process (`serve`, `gateway`, `worker`,
`scheduler`) runs on.

uvloop (libuv's loop, written in C) by default: a process handling many small Redis commands
and HTTP calls spends noticeably less CPU in the loop's own machinery on it (docs/performance.md,
W3). `SWITCHBOARD_EVENT_LOOP=asyncio` keeps Python's own loop, and so does a machine without
uvloop (it is not installed on Windows). The short commands (`chat`, `status`, ...) stay on
Python's loop: importing uvloop would only add to their start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from bots.settings import Settings

__all__ = ["loop_factory", "run_process"]

T = TypeVar("T")


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the loop the settings ask for; None for Python's own."""
    if settings.event_loop != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_process(settings: Settings, main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on the loop the settings ask for."""
    with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
        return runner.run(main)
