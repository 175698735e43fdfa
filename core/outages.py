"""`Patience`: a turn waits out an outage of the store or the bus instead of giving up.

A turn that has paid for a model call must not lose its answer, or pay for it again, because
Redis restarted for a second or the data disk filled up for a while. Its reads and writes go
through a `Patience`: a call that fails with `Unavailable` (`core/errors.py`) is tried again,
the same call, with exponential backoff, until it succeeds or the outage has lasted `budget`
seconds; only then is the error raised (the worker keeps the message and tries it later). A
write tried again must be safe to repeat: the store's writes are (records' own ids, fences,
dedupe ids).

One `Patience` serves every turn of a worker: it logs one WARNING when an outage starts
(the first call that fails) and one INFO when it ends (the next call that succeeds), never a
traceback for it. A read that succeeds ends only an outage reads met too: on a full disk
reads still work while every write fails, and that is one outage, not one per read.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from core.errors import BusUnavailable, Unavailable

__all__ = ["OUTAGE_BUDGET", "Patience", "redis_outage"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# How long a turn waits for the store or the bus to come back before it gives the message
# back to its worker: far longer than a Redis restart (about a second, plus loading its data),
# short enough that a turn does not hold its session for good.
OUTAGE_BUDGET: Final = 45.0
_FIRST_WAIT = 0.1
_LONGEST_WAIT = 3.0


class Patience:
    """Tries a call again while the store or the bus is away, for up to `budget` seconds."""

    def __init__(self, name: str = "turns", *, budget: float = OUTAGE_BUDGET) -> None:
        """`name` says whose calls wait, in the log lines."""
        self.name = name
        self.budget = budget
        self._outage: str | None = None
        self._reads_failed = False

    @property
    def waiting(self) -> bool:
        """Whether the last call seen failed for an outage (and none succeeded since)."""
        return self._outage is not None

    async def __call__(self, operation: Callable[[], Awaitable[_T]], *, read: bool = False) -> _T:
        """`operation()`, tried again while it fails with `Unavailable` (within the budget).

        `read`: the operation only reads (see the module's docstring)."""
        # The first attempt is made directly: almost every call succeeds at once, and
        # building tenacity's retry loop for each would cost a busy worker CPU.
        try:
            result = await operation()
        except Unavailable as exc:
            self.failed(exc, read=read)
        else:
            self.worked(read=read)
            return result

        def noted(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            if isinstance(error, Unavailable):
                self.failed(error, read=read)

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Unavailable),
            wait=wait_exponential_jitter(multiplier=_FIRST_WAIT, max=_LONGEST_WAIT),
            stop=stop_after_delay(self.budget),
            before_sleep=noted,
            reraise=True,
        )
        await asyncio.sleep(_FIRST_WAIT)
        # Iterated rather than called: tenacity would call a lambda returning a coroutine
        # without awaiting it (it only awaits coroutine functions).
        async for attempt in retrying:
            with attempt:
                result = await operation()
            outcome = attempt.retry_state.outcome
            if outcome is None or not outcome.failed:
                self.worked(read=read)
                return result
        raise AssertionError("unreachable: tenacity retries until it succeeds or raises")

    def failed(self, exc: Exception, *, read: bool = False) -> None:
        """A call failed for an outage: logged if it is the first since calls last worked.

        Also for callers that try again on their own (a lease renewed on a schedule)."""
        if self._outage is None:
            log.warning("%s are waiting for the store or the bus: %s", self.name, exc)
        self._outage = str(exc)
        self._reads_failed = self._reads_failed or read

    def worked(self, *, read: bool = False) -> None:
        """A call succeeded: an outage under way has ended (for a read, one reads met)."""
        if self._outage is None or (read and not self._reads_failed):
            return
        self._outage = None
        self._reads_failed = False
        log.info("%s: the store and the bus answer again", self.name)


def redis_outage(exc: BaseException) -> BusUnavailable | None:
    """`exc` as the outage it is when a library on Redis raised it (the rate limits' counters
    raise redis-py's errors as they are); None for anything else."""
    errors = sys.modules.get("redis.exceptions")
    if errors is None or not isinstance(exc, errors.RedisError):
        return None  # redis-py is not even loaded: it raised nothing
    from core.backends.redis.client import is_outage

    return BusUnavailable(f"Redis is away: {exc}") if is_outage(exc) else None
