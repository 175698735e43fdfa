"""Whether a process can do its work now: its loops report in, its dependencies are asked.

A loop that depends on the bus or the store (a gateway's intake and delivery, a worker's
receive, the scheduler) marks itself up or down as its calls succeed or fail; a check (the
store answers a read, the bus a ping) is asked when readiness is wanted. The process is
ready when every mark is up and every check passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, stop_never, wait_exponential_jitter

from core.errors import BusError, StoreError

__all__ = ["Readiness", "ReadinessReport", "keep_trying"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# Backoff between attempts while the bus or the store is away: quick at first (a dropped
# connection), then at most every few seconds (Redis restarting), never giving up.
_FIRST_WAIT = 0.1
_LONGEST_WAIT = 3.0

Check = Callable[[], Awaitable[None]]
"""Raises when the dependency it asks does not answer."""


@dataclass(frozen=True)
class ReadinessReport:
    """What readiness found: ready or not, and a short word per loop and check."""

    ready: bool
    details: dict[str, str]


class Readiness:
    """The marks of a process's loops and the checks of its dependencies."""

    def __init__(self, *, check_timeout: float = 2.0) -> None:
        self._marks: dict[str, str | None] = {}
        self._checks: dict[str, Check] = {}
        self._timeout = check_timeout

    def add_check(self, name: str, check: Check) -> None:
        """Ask `check` whenever readiness is wanted."""
        self._checks[name] = check

    def up(self, name: str) -> None:
        """The loop `name` is doing its work."""
        if self._marks.get(name) is not None:
            log.info("%s is working again", name)
        self._marks[name] = None

    def down(self, name: str, reason: str) -> None:
        """The loop `name` cannot do its work now (it keeps trying)."""
        if self._marks.get(name) is None:
            log.warning("%s is not working: %s", name, reason)
        self._marks[name] = reason

    def forget(self, name: str) -> None:
        """The loop `name` stopped on purpose: it no longer counts."""
        self._marks.pop(name, None)

    async def report(self) -> ReadinessReport:
        """Every mark, and every check asked now (each within the check timeout)."""
        details = {name: reason or "ok" for name, reason in self._marks.items()}
        for name, check in self._checks.items():
            details[name] = await self._ask(check)
        return ReadinessReport(all(value == "ok" for value in details.values()), details)

    async def _ask(self, check: Check) -> str:
        try:
            async with asyncio.timeout(self._timeout):
                await check()
        except TimeoutError:
            return f"no answer within {self._timeout:g}s"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:200]
        return "ok"


async def keep_trying(
    readiness: Readiness,
    name: str,
    operation: Callable[[], Awaitable[_T]],
    *,
    stopping: asyncio.Event | None = None,
) -> _T:
    """`operation()`, tried again with backoff for as long as the bus or the store fails.

    Meanwhile the loop `name` is marked down (it comes up again on the first success), so the
    process says it is not ready instead of going quiet. Once `stopping` is set the last
    failure is raised instead of waiting for another attempt.
    """

    # The first attempt is made directly: almost every call succeeds at once, and building
    # tenacity's retry loop for it cost a worker about 5 % of its CPU (docs/performance.md).
    try:
        result = await operation()
    except (BusError, StoreError) as exc:
        if stopping is not None and stopping.is_set():
            raise
        readiness.down(name, str(exc) or type(exc).__name__)
    else:
        readiness.up(name)
        return result

    retrying = _retrying(readiness, name, stopping)
    # The first failure waits like tenacity's first retry would have.
    await _pause(_FIRST_WAIT, stopping)
    # Iterated rather than called: tenacity would call a lambda returning a coroutine without
    # awaiting it (it only awaits coroutine functions).
    async for attempt in retrying:
        with attempt:
            result = await operation()
        if not attempt.retry_state.outcome or not attempt.retry_state.outcome.failed:
            readiness.up(name)
            return result
    raise AssertionError("unreachable: tenacity retries until it succeeds or raises")


def _retrying(readiness: Readiness, name: str, stopping: asyncio.Event | None) -> AsyncRetrying:
    """Tenacity's loop for `keep_trying`: bus and store failures tried again with backoff
    (the loop `name` marked down before each wait) until `stopping` is set."""

    def worth_another_try(state: RetryCallState) -> bool:
        if state.outcome is None or not state.outcome.failed:
            return False
        if stopping is not None and stopping.is_set():
            return False
        return isinstance(state.outcome.exception(), (BusError, StoreError))

    def mark_down(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        readiness.down(name, str(error) or type(error).__name__)

    async def pause(seconds: float) -> None:
        await _pause(seconds, stopping)

    return AsyncRetrying(
        retry=worth_another_try,
        wait=wait_exponential_jitter(multiplier=_FIRST_WAIT, max=_LONGEST_WAIT),
        stop=stop_never,
        sleep=pause,
        before_sleep=mark_down,
        reraise=True,
    )


async def _pause(seconds: float, stopping: asyncio.Event | None) -> None:
    """Wait `seconds`, or less once `stopping` is set."""
    if stopping is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
