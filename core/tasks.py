"""`cancel_and_wait`: stop a background task for certain, even if it swallows a cancellation.

On Python 3.11 `asyncio.wait_for` returns the result instead of raising `CancelledError` when
the cancellation arrives just as the awaited operation completes (fixed in 3.12). redis-py
sends every command through `wait_for` when the connection has a socket timeout (its default
since 8.0), so a task cancelled while it talks to Redis can carry on as if nothing happened; a
loop then runs forever and whoever awaits it hangs.

Asking again interrupts whatever clean-up the task was doing, so a task whose clean-up takes
a few bounded seconds (leaving an MCP session: close the server's input, wait, terminate,
kill) is asked again only after `ask_again` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]

# How long to wait for a cancelled task before asking again.
_ASK_AGAIN_SECONDS = 0.5


async def cancel_and_wait(
    task: asyncio.Future[Any], *, ask_again: float = _ASK_AGAIN_SECONDS
) -> None:
    """Cancel `task` and return once it has finished, asking again every `ask_again` seconds
    while it runs on.

    An exception the task ended with (other than its cancellation) is raised here.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=ask_again)
    with contextlib.suppress(asyncio.CancelledError):
        await task
