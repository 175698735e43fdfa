"""Reliability around providers: bounded retries, a circuit breaker, and a fallback chain.

`ReliableProvider` retries failures that may pass (rate limits, overload, server errors,
timeouts) with tenacity, honouring the API's `retry-after`, within a total time bound, and only
before the first event streamed: once text reached the user a retry would repeat it. A stream
that still failed before its first event with a server fault (a cut stream included) is
followed by one non-streamed call of the same request, unless the breaker opened. Each
attempt has a deadline for the whole call (`call_timeout`), streaming included; the waits
between attempts count toward the retry bound (`max_seconds`), never toward that deadline, so
a failure is reported for what it was (overloaded, rate limited), not as slowness. A stream
silent too long once its answer began is cut by the SDK provider itself
(`core/providers/idle.py`) and fails here as any cut stream does. Each
provider has a `CircuitBreaker`; `FallbackProvider` moves on to the next provider of the chain
when one is unavailable or its breaker is open.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from core.errors import ProviderError
from core.events import ModelEvent, RetryEnded, RetryStarted
from core.providers.base import ModelRequest, Provider

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "FallbackProvider",
    "ReliableProvider",
    "RetryPolicy",
]

log = logging.getLogger(__name__)

# Failures that say nothing about the provider's health: the request itself was the problem.
_REQUEST_FAULTS = frozenset({"bad_request", "content_blocked", "context_overflow"})
# Failures of a stream that the same request unstreamed may get past: a broken stream or a
# server fault. Not a rate limit or a rejected key (they refuse every way of asking), nor a
# timeout (a whole answer takes at least as long as its first piece).
_STREAM_FAULTS = frozenset({"server"})


class RetryPolicy(BaseModel):
    """How hard to try one call before giving up on a provider."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=4, ge=1, le=20)
    # No retry starts whose wait would end later than this after the first attempt began.
    max_seconds: float = Field(default=60.0, gt=0)
    initial_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=20.0, ge=0)
    # Each attempt, from the request to the last streamed event, must end within this; None:
    # only the SDK's own network timeouts bound it.
    call_timeout: float | None = Field(default=None, gt=0)


class BreakerState(enum.StrEnum):
    """Closed: calls flow. Open: calls are refused. Half-open: one probe call is let through."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Opens after `threshold` consecutive failures; after `cooldown` one probe may try."""

    def __init__(
        self,
        *,
        threshold: int = 5,
        cooldown: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker turns half-open once the cool-down passed)."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self.cooldown:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def allow(self) -> bool:
        """Whether a call may go out now; in half-open state only the first caller may."""
        match self.state:
            case BreakerState.CLOSED:
                return True
            case BreakerState.OPEN:
                return False
            case BreakerState.HALF_OPEN:
                if self._probing:
                    return False
                self._probing = True
                return True

    def record_success(self) -> None:
        """A call succeeded: close the breaker."""
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self) -> None:
        """A call failed: count it; open (again) at the threshold or when a probe failed."""
        self._failures += 1
        if self._probing or self._failures >= self.threshold:
            self._opened_at = self._clock()
        self._probing = False


class ReliableProvider:
    """Wraps a provider with classified, bounded retries and a circuit breaker."""

    def __init__(
        self,
        inner: Provider,
        *,
        policy: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.breaker = breaker or CircuitBreaker()
        self._sleep = sleep or asyncio.sleep
        self._backoff = wait_exponential_jitter(
            multiplier=self.policy.initial_delay, max=self.policy.max_delay
        )

    @property
    def name(self) -> str:
        return self.inner.name

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The inner stream, retried until its first event; `ProviderError` on failure.

        Each wait before a retry is announced (`RetryStarted`) and the retries' end too
        (`RetryEnded`), so the turn's lifecycle shows a model call that is being retried.
        """
        self._check_breaker()
        events: AsyncGenerator[ModelEvent, None] | None = None
        first: ModelEvent | None = None
        # Tenacity decides whether and how long to wait; the wait itself is made here, after
        # the event announcing it is out (a generator cannot yield from tenacity's sleep).
        waits: list[tuple[ProviderError, float]] = []
        retrying = self._retrying(waits)
        attempts = 0
        try:
            async for attempt in retrying:
                if waits:
                    error, wait = waits.pop()
                    yield RetryStarted(
                        provider=self.name,
                        attempt=attempts + 1,
                        wait_s=round(wait, 3),
                        error_kind=error.kind,
                        message=str(error),
                    )
                    await self._sleep(wait)
                attempts += 1
                with attempt:
                    events = self._attempt(request)
                    first = await anext(events)
        except ProviderError as exc:
            if attempts > 1:
                yield RetryEnded(provider=self.name, attempts=attempts, outcome="failed")
            unstreamed = self.breaker.state is BreakerState.CLOSED and exc.kind in _STREAM_FAULTS
            if not request.stream or not unstreamed:
                raise
            # The stream never gave a first event: some proxies and servers break streams
            # that a whole answer gets through, so the same request is asked once unstreamed.
            log.warning(
                "%s stream failed before its first event (%s); asking once without streaming",
                self.name,
                exc,
            )
            events = self._attempt(request.model_copy(update={"stream": False}))
            first = await anext(events)
        else:
            if attempts > 1:
                yield RetryEnded(provider=self.name, attempts=attempts, outcome="succeeded")
        assert events is not None and first is not None
        try:
            yield first
            async for event in events:
                yield event
        except ProviderError as exc:
            self._count(exc)
            raise
        finally:
            await events.aclose()
        self.breaker.record_success()

    def _check_breaker(self) -> None:
        """`ProviderError` (unavailable) while the circuit breaker refuses calls."""
        if not self.breaker.allow():
            raise ProviderError(
                "unavailable",
                f"{self.name} is failing; its circuit breaker is open",
                provider=self.name,
            )

    def _retrying(self, waits: list[tuple[ProviderError, float]]) -> AsyncRetrying:
        """Tenacity's retries of one stream's start under the policy; each wait it decides
        on is put in `waits` for the stream to announce and make."""
        return AsyncRetrying(
            stop=stop_after_attempt(self.policy.max_attempts)
            | stop_before_delay(self.policy.max_seconds),
            wait=self._wait,
            retry=retry_if_exception(self._should_retry),
            before_sleep=lambda state: self._note_retry(state, waits),
            reraise=True,
            sleep=_no_wait,
        )

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        started = False
        events = self.inner.stream(request)
        limit = self.policy.call_timeout
        deadline = None if limit is None else asyncio.get_running_loop().time() + limit
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(events)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise ProviderError(
                        "timeout",
                        f"{self.name} did not finish its answer within {limit:g}s",
                        provider=self.name,
                    ) from None
                started = True
                yield event
        except ProviderError as exc:
            if not started:
                self._count(exc)
            raise
        finally:
            closing = getattr(events, "aclose", None)
            if closing is not None:
                await closing()
        if not started:
            self._count(ProviderError("server", "empty answer", provider=self.name))
            raise ProviderError("server", f"{self.name} sent an empty answer", provider=self.name)

    def _count(self, exc: ProviderError) -> None:
        if exc.kind not in _REQUEST_FAULTS:
            self.breaker.record_failure()

    def _should_retry(self, exc: BaseException) -> bool:
        return (
            isinstance(exc, ProviderError)
            and exc.retryable
            and self.breaker.state is BreakerState.CLOSED
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return exc.retry_after
        return float(self._backoff(state))

    def _note_retry(self, state: RetryCallState, waits: list[tuple[ProviderError, float]]) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.upcoming_sleep
        if isinstance(exc, ProviderError):
            waits.append((exc, wait))
        log.warning(
            "%s call failed (attempt %d): %s; retrying in %.1fs",
            self.name,
            state.attempt_number,
            exc,
            wait,
        )


async def _no_wait(_seconds: float) -> None:
    """Tenacity's sleep: none (the stream waits itself, see `ReliableProvider.stream`)."""


class FallbackProvider:
    """Tries each `(provider, model)` of a chain in order until one answers."""

    def __init__(self, chain: Sequence[tuple[Provider, str]]) -> None:
        if not chain:
            raise ValueError("a fallback chain needs at least one provider")
        self.chain = list(chain)

    @property
    def name(self) -> str:
        return self.chain[0][0].name

    async def aclose(self) -> None:
        """Close every provider of the chain."""
        for provider, _ in self.chain:
            await provider.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The first provider's stream; on its failure before any event, the next one's."""
        last_error: ProviderError | None = None
        for index, (provider, model) in enumerate(self.chain):
            attempt = request if index == 0 else request.model_copy(update={"model": model})
            started = False
            try:
                async for event in provider.stream(attempt):
                    # A retry's notice is not an answer begun: the next provider may still try.
                    started = started or not isinstance(event, RetryStarted | RetryEnded)
                    yield event
                return
            except ProviderError as exc:
                if started or exc.kind in _REQUEST_FAULTS:
                    raise
                last_error = exc
                if index + 1 < len(self.chain):
                    log.warning(
                        "%s unavailable (%s: %s); falling back to %s",
                        provider.name,
                        exc.kind,
                        exc,
                        self.chain[index + 1][0].name,
                    )
        assert last_error is not None
        raise last_error
