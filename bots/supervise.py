"""Keeping each chat platform of a `serve` running on its own.

A platform that cannot connect (its API unreachable, a network error) is tried again with
backoff, its adapter built afresh each time, while the other platforms keep serving; its
`<platform> connection` readiness mark is down meanwhile. A platform that can never run (its
token refused: `ConfigError`, or a permanent `ChannelError`) is given up with one error line.
`serve` stops only when every platform has been given up, or when asked to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_never
from tenacity import wait_exponential_jitter as backoff

from core.errors import ChannelError, ConfigError, SwitchboardError
from core.readiness import Readiness

__all__ = ["PlatformRunner", "Runnable", "ServedPlatforms", "Stoppable"]

log = logging.getLogger("switchboard")

# Between attempts to connect: a second at first, then up to a minute, for as long as it takes.
_FIRST_WAIT = 1.0
_LONGEST_WAIT = 60.0
# An attempt that has run this long without failing has connected: readiness is told so. (An
# adapter does not say when it is connected; its failures to connect come well before this.)
_SETTLED = 10.0


class Runnable(Protocol):
    """Something `serve` runs until it ends: a gateway, or all of a serve's platforms."""

    async def run(self) -> None:
        """Run until done or stopped."""
        ...


class Stoppable(Runnable, Protocol):
    """What a runner needs of a `channels.gateway.Gateway`."""

    async def stop(self) -> None:
        """Ask it to stop; `run()` returns once it has."""
        ...


def _permanent(exc: BaseException) -> bool:
    return isinstance(exc, ConfigError) or (isinstance(exc, ChannelError) and exc.permanent)


def _worth_retrying(exc: BaseException) -> bool:
    # Only errors: a cancellation (the process stopping) must end the runner, not be retried.
    return isinstance(exc, Exception) and not _permanent(exc)


class PlatformRunner:
    """Runs one platform's gateway, building it again after a failure that may pass."""

    def __init__(
        self,
        platform: str,
        build: Callable[[], Stoppable],
        readiness: Readiness,
        *,
        first_wait: float = _FIRST_WAIT,
        longest_wait: float = _LONGEST_WAIT,
        settled: float = _SETTLED,
    ) -> None:
        self.platform = platform
        self._build = build
        self._readiness = readiness
        self._mark = f"{platform} connection"
        self._wait = backoff(multiplier=first_wait, max=longest_wait)
        self._settled = settled
        self._stopping = asyncio.Event()
        self._current: Stoppable | None = None

    async def run(self) -> BaseException | None:
        """Serve until stopped (None) or until the platform cannot ever run (that error)."""
        retrying = AsyncRetrying(
            retry=retry_if_exception(_worth_retrying),
            wait=self._wait,
            stop=stop_never,
            sleep=self._pause,
            before_sleep=self._note_failure,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if self._stopping.is_set():
                        return None
                    await self._attempt()
        except Exception as exc:
            if not _permanent(exc):
                raise
            self._readiness.down(self._mark, str(exc))
            log.error("%s cannot run, the other platforms go on: %s", self.platform, exc)
            return exc
        return None

    async def stop(self) -> None:
        """Stop the running gateway, or the wait before the next attempt."""
        self._stopping.set()
        if self._current is not None:
            await self._current.stop()

    async def _attempt(self) -> None:
        gateway = self._build()
        self._current = gateway
        running = asyncio.ensure_future(gateway.run())
        try:
            # The mark a failure left stays down until this attempt has held for a while.
            done, _ = await asyncio.wait({running}, timeout=self._settled)
            if not done:
                self._readiness.forget(self._mark)
            await running
        finally:
            if not running.done():
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            self._current = None

    def _note_failure(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        reason = str(error) or type(error).__name__
        self._readiness.down(self._mark, reason)
        log.warning(
            "%s stopped (%s); trying again in %.0fs while the others keep serving",
            self.platform,
            reason,
            state.upcoming_sleep,
        )

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass


class ServedPlatforms:
    """Every platform of a `serve`, each in its `PlatformRunner`; runs until all have ended."""

    def __init__(self, runners: Sequence[PlatformRunner]) -> None:
        self.runners = list(runners)

    async def run(self) -> None:
        """Run them all; `SwitchboardError` (or the one platform's error) if none could run."""
        results = await asyncio.gather(*(runner.run() for runner in self.runners))
        failures = [error for error in results if error is not None]
        if not failures or len(failures) < len(self.runners):
            return
        if len(failures) == 1:
            raise failures[0]
        reasons = "; ".join(
            f"{r.platform}: {e}" for r, e in zip(self.runners, results, strict=True)
        )
        raise SwitchboardError(f"no chat platform could run ({reasons})")

    async def stop(self) -> None:
        """Stop every platform."""
        await asyncio.gather(*(runner.stop() for runner in self.runners))
