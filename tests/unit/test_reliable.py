"""Retries, the circuit breaker and the fallback chain, over scripted providers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.errors import ProviderError
from core.events import Finished, ModelEvent, RetryEnded, RetryStarted, TextDelta
from core.messages import Message
from core.providers import ModelRequest, Provider, ScriptedProvider, text_reply
from core.providers.reliable import (
    BreakerState,
    CircuitBreaker,
    FallbackProvider,
    ReliableProvider,
    RetryPolicy,
)

REQUEST = ModelRequest(model="primary-model", messages=[Message.user("hi")])


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """Records the waits asked for instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def error(kind: Any, retry_after: float | None = None) -> ProviderError:
    return ProviderError(kind, f"{kind} happened", provider="scripted", retry_after=retry_after)


def state(breaker: CircuitBreaker) -> BreakerState:
    """`breaker.state`, read afresh: mypy keeps a property narrowed across calls that change it."""
    return breaker.state


async def collect(provider: Provider, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    return [event async for event in provider.stream(request)]


def reliable(
    script: list[Any],
    *,
    attempts: int = 4,
    seconds: float = 60.0,
    breaker: CircuitBreaker | None = None,
) -> tuple[ReliableProvider, ScriptedProvider, Sleeps]:
    inner = ScriptedProvider(script)
    sleeps = Sleeps()
    wrapped = ReliableProvider(
        inner,
        policy=RetryPolicy(max_attempts=attempts, max_seconds=seconds, initial_delay=0.5),
        breaker=breaker or CircuitBreaker(threshold=10),
        sleep=sleeps,
    )
    return wrapped, inner, sleeps


@pytest.mark.parametrize("kind", ["rate_limit", "overloaded", "server", "timeout"])
async def test_retryable_failures_are_retried_until_an_answer(kind: str) -> None:
    provider, inner, sleeps = reliable([error(kind), error(kind), text_reply("finally")])

    events = await collect(provider)

    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="finally")]
    assert len(inner.requests) == 3
    assert len(sleeps.waits) == 2
    assert all(0 <= w <= 20 for w in sleeps.waits)


async def test_retry_after_from_the_api_is_the_wait() -> None:
    provider, _, sleeps = reliable([error("rate_limit", retry_after=3.0), text_reply("ok")])

    await collect(provider)

    assert sleeps.waits == [3.0]


@pytest.mark.parametrize("kind", ["auth", "billing", "model_not_found", "bad_request"])
async def test_permanent_failures_fail_fast(kind: str) -> None:
    provider, inner, sleeps = reliable([error(kind), text_reply("never")])

    with pytest.raises(ProviderError) as raised:
        await collect(provider)

    assert raised.value.kind == kind
    assert len(inner.requests) == 1
    assert sleeps.waits == []


async def test_attempts_are_bounded() -> None:
    provider, inner, _ = reliable([error("server")] * 5, attempts=3)

    with pytest.raises(ProviderError):
        await collect(provider)

    # Three streamed attempts, then the one unstreamed call a failed stream gets.
    assert [r.stream for r in inner.requests] == [True, True, True, False]


async def test_a_wait_past_the_total_bound_is_not_started() -> None:
    provider, inner, sleeps = reliable(
        [error("rate_limit", retry_after=120.0), text_reply("too late")], seconds=60.0
    )

    with pytest.raises(ProviderError) as raised:
        await collect(provider)

    assert raised.value.kind == "rate_limit"
    assert len(inner.requests) == 1
    assert sleeps.waits == []


async def test_no_retry_once_text_has_streamed() -> None:
    def breaks_midway(_request: ModelRequest) -> list[ModelEvent]:
        raise AssertionError("not reached")

    class HalfThenFail:
        name = "half"

        def __init__(self) -> None:
            self.calls = 0

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            self.calls += 1
            yield TextDelta(text="partial ")
            raise error("server")

        async def aclose(self) -> None:
            """Nothing to release."""

    inner = HalfThenFail()
    provider = ReliableProvider(inner, sleep=Sleeps())
    seen: list[ModelEvent] = []

    with pytest.raises(ProviderError):
        async for event in provider.stream(REQUEST):
            seen.append(event)

    assert seen == [TextDelta(text="partial ")]
    assert inner.calls == 1


class _SteadyStream:
    """Streams `pieces` deltas, each after `gap` seconds: never silent for long, slow overall."""

    name = "steady"

    def __init__(self, pieces: int, gap: float) -> None:
        self.pieces, self.gap = pieces, gap
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        for i in range(self.pieces):
            await asyncio.sleep(self.gap)
            yield TextDelta(text=f"{i} ")
        yield Finished()

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_the_call_timeout_bounds_the_whole_call_not_the_silence() -> None:
    # Twenty pieces 0.02 s apart keep talking for 0.4 s: past the 0.15 s deadline.
    inner = _SteadyStream(pieces=20, gap=0.02)
    provider = ReliableProvider(inner, policy=RetryPolicy(call_timeout=0.15), sleep=Sleeps())
    seen: list[ModelEvent] = []

    with pytest.raises(ProviderError) as raised:
        async for event in provider.stream(REQUEST):
            seen.append(event)

    assert raised.value.kind == "timeout"
    assert str(raised.value) == "steady did not finish its answer within 0.15s"
    assert 0 < len(seen) < 20
    assert inner.calls == 1  # text was shown: not tried again


async def test_a_call_that_finishes_in_time_is_not_cut() -> None:
    provider = ReliableProvider(
        _SteadyStream(pieces=3, gap=0.01), policy=RetryPolicy(call_timeout=5), sleep=Sleeps()
    )

    events = await collect(provider)

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["0 ", "1 ", "2 "]


async def test_retry_waits_do_not_count_toward_the_call_timeout() -> None:
    """Each attempt gets its own deadline, started after the wait (a real one here)."""
    inner = ScriptedProvider([error("overloaded", retry_after=0.2), text_reply("after the wait")])
    provider = ReliableProvider(inner, policy=RetryPolicy(call_timeout=0.1))

    events = await collect(provider)

    assert TextDelta(text="after the wait") in events
    assert len(inner.requests) == 2


async def test_an_empty_answer_counts_as_a_server_failure() -> None:
    provider, inner, _ = reliable([[], text_reply("second try")])

    events = await collect(provider)

    assert TextDelta(text="second try") in events
    assert len(inner.requests) == 2


def test_breaker_opens_after_threshold_and_probes_after_cooldown() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown=30.0, clock=clock)

    for _ in range(2):
        breaker.record_failure()
    assert state(breaker) is BreakerState.CLOSED and breaker.allow()
    breaker.record_failure()
    assert state(breaker) is BreakerState.OPEN and not breaker.allow()

    clock.now += 30.0
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # only one probe at a time
    breaker.record_failure()
    assert state(breaker) is BreakerState.OPEN  # a failed probe reopens at once

    clock.now += 30.0
    assert breaker.allow()
    breaker.record_success()
    assert state(breaker) is BreakerState.CLOSED and breaker.allow()


async def test_an_open_breaker_refuses_without_calling_and_stops_retries() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=2, cooldown=30.0, clock=clock)
    provider, inner, _ = reliable([error("server")] * 4, attempts=4, breaker=breaker)

    with pytest.raises(ProviderError):
        await collect(provider)
    # Two failures opened the breaker; the remaining attempts were not spent on a dead provider.
    assert len(inner.requests) == 2
    assert breaker.state is BreakerState.OPEN

    with pytest.raises(ProviderError) as raised:
        await collect(provider)
    assert raised.value.kind == "unavailable"
    assert len(inner.requests) == 2


async def test_request_faults_do_not_trip_the_breaker() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=30.0)
    provider, _, _ = reliable([error("context_overflow"), error("bad_request")], breaker=breaker)

    for _ in range(2):
        with pytest.raises(ProviderError):
            await collect(provider)

    assert breaker.state is BreakerState.CLOSED


async def test_fallback_takes_over_when_the_primary_is_down() -> None:
    primary, primary_inner, _ = reliable([error("overloaded")] * 4, attempts=2)
    backup = ScriptedProvider([text_reply("from the backup")], name="backup")
    chain = FallbackProvider([(primary, "primary-model"), (backup, "backup-model")])

    events = await collect(chain)

    assert TextDelta(text="from the backup") in events
    assert len(primary_inner.requests) == 2
    assert backup.requests[0].model == "backup-model"
    assert backup.requests[0].messages == REQUEST.messages


async def test_fallback_skips_a_primary_whose_breaker_is_open() -> None:
    breaker = CircuitBreaker(threshold=1, cooldown=60.0)
    breaker.record_failure()
    primary, primary_inner, _ = reliable([text_reply("unused")], breaker=breaker)
    backup = ScriptedProvider([text_reply("backup answers")], name="backup")

    events = await collect(FallbackProvider([(primary, "p"), (backup, "b")]))

    assert TextDelta(text="backup answers") in events
    assert primary_inner.requests == []


async def test_request_faults_are_not_retried_elsewhere() -> None:
    primary = ScriptedProvider([error("content_blocked")], name="primary")
    backup = ScriptedProvider([text_reply("unused")], name="backup")

    with pytest.raises(ProviderError) as raised:
        await collect(FallbackProvider([(primary, "p"), (backup, "b")]))

    assert raised.value.kind == "content_blocked"
    assert backup.requests == []


async def test_when_every_provider_fails_the_last_error_is_raised() -> None:
    primary = ScriptedProvider([error("auth")], name="primary")
    backup = ScriptedProvider([error("billing")], name="backup")

    with pytest.raises(ProviderError) as raised:
        await collect(FallbackProvider([(primary, "p"), (backup, "b")]))

    assert raised.value.kind == "billing"


async def test_finished_is_passed_through_with_usage() -> None:
    provider, _, _ = reliable([[TextDelta(text="x"), Finished(provider="p", model="m")]])

    events = await collect(provider)

    assert events[-1] == Finished(provider="p", model="m")


class Announced:
    """Collects a stream's events, noting the waits already made when each one came."""

    def __init__(self, sleeps: Sleeps) -> None:
        self.sleeps = sleeps
        self.events: list[tuple[ModelEvent, int]] = []

    async def collect(self, provider: Provider) -> None:
        async for event in provider.stream(REQUEST):
            self.events.append((event, len(self.sleeps.waits)))


async def test_each_retry_is_announced_before_its_wait_and_the_retries_end_is_too() -> None:
    provider, inner, sleeps = reliable(
        [
            error("overloaded", retry_after=2.0),
            error("rate_limit", retry_after=3.0),
            text_reply("finally"),
        ]
    )
    seen = Announced(sleeps)

    await seen.collect(provider)

    assert seen.events[:3] == [
        (
            RetryStarted(
                provider="scripted",
                attempt=2,
                wait_s=2.0,
                error_kind="overloaded",
                message="overloaded happened",
            ),
            0,
        ),
        (
            RetryStarted(
                provider="scripted",
                attempt=3,
                wait_s=3.0,
                error_kind="rate_limit",
                message="rate_limit happened",
            ),
            1,
        ),
        (RetryEnded(provider="scripted", attempts=3, outcome="succeeded"), 2),
    ]
    assert seen.events[3][0] == TextDelta(text="finally")
    assert sleeps.waits == [2.0, 3.0]
    assert len(inner.requests) == 3


async def test_retries_that_all_fail_end_with_a_failed_retry_end_before_the_error() -> None:
    provider, _, _ = reliable([error("overloaded")] * 3, attempts=2)
    seen: list[ModelEvent] = []

    with pytest.raises(ProviderError) as raised:
        async for event in provider.stream(REQUEST):
            seen.append(event)

    assert raised.value.kind == "overloaded"
    assert [type(e) for e in seen] == [RetryStarted, RetryEnded]
    assert seen[1] == RetryEnded(provider="scripted", attempts=2, outcome="failed")


async def test_a_call_answered_at_once_announces_no_retry() -> None:
    provider, _, _ = reliable([text_reply("at once")])

    events = await collect(provider)

    assert not [e for e in events if isinstance(e, RetryStarted | RetryEnded)]


async def test_a_server_failure_before_the_first_event_is_asked_once_unstreamed() -> None:
    provider, inner, _ = reliable(
        [error("server"), error("server"), text_reply("whole")], attempts=2
    )

    events = await collect(provider)

    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="whole")]
    assert [r.stream for r in inner.requests] == [True, True, False]
    assert inner.requests[2].messages == REQUEST.messages


async def test_a_retried_provider_that_gives_up_still_hands_over_to_the_next_of_the_chain() -> None:
    """The retry notices are not an answer begun: the chain moves on as before."""
    primary, _, _ = reliable([error("overloaded")] * 2, attempts=2)
    secondary = ScriptedProvider([text_reply("from the second")], name="second")
    chain = FallbackProvider([(primary, "primary-model"), (secondary, "second-model")])

    events = await collect(chain)

    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="from the second")]
    assert secondary.requests[0].model == "second-model"
