"""`TypingRenewal`: keep a platform's "typing…" indicator on while a turn runs.

Telegram shows it for about 5 s per call and Discord for about 10 s, so an adapter renews it
until the reply is finished. The reply may be shown by another gateway: its record (the reply
records, a database) says so, and renewing stops.

A renewal is stopped by an event and awaited, never cancelled: it may be inside a query of the
reply records, and a query cancelled halfway makes SQLAlchemy's aiosqlite adapter close that
connection in a task of its own that can wait forever for the connection's thread, which is
already gone (the process or the test then hangs at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

from core.tasks import cancel_and_wait

__all__ = ["TypingRenewal", "stop_renewals"]

# How long stopping renewals may take to notice before they are cancelled after all (a stalled
# platform call or query); a query of the reply records takes milliseconds.
_STOP_GRACE_SECONDS = 2.0


class TypingRenewal:
    """Calls `show` every `interval` seconds until stopped, `finished()` is true or `limit`
    seconds have passed. With `wait_first`, the first call comes after one interval (the
    adapter showed the indicator itself)."""

    def __init__(
        self,
        show: Callable[[], Awaitable[None]],
        finished: Callable[[], Awaitable[bool]],
        *,
        interval: float,
        limit: float,
        wait_first: bool = False,
    ) -> None:
        self._show = show
        self._finished = finished
        self._interval = interval
        self._limit = limit
        self._wait_first = wait_first
        self._stopping = asyncio.Event()
        self.task: asyncio.Task[None] = asyncio.create_task(self._run(), name="typing")

    def done(self) -> bool:
        return self.task.done()

    def stop(self) -> None:
        """Ask the renewal to end at its next step (it ends on its own; nothing is cancelled)."""
        self._stopping.set()

    async def stopped(self) -> None:
        """Stop the renewal and return once it has ended."""
        await stop_renewals([self])

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self._limit
        if self._wait_first and await self._waited():
            return
        while loop.time() < until and not self._stopping.is_set():
            if await self._finished() or self._stopping.is_set():
                return
            await self._show()
            if await self._waited():
                return

    async def _waited(self) -> bool:
        """Wait one interval; true when the renewal was stopped meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), self._interval)
        return self._stopping.is_set()


async def stop_renewals(renewals: Iterable[TypingRenewal]) -> None:
    """Stop every renewal and return once all have ended; those still running after a grace
    period (a stalled call) are cancelled."""
    renewals = list(renewals)
    for renewal in renewals:
        renewal.stop()
    tasks = {renewal.task for renewal in renewals}
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=_STOP_GRACE_SECONDS)
    for task in pending:
        await cancel_and_wait(task)
