"""What feeds `core.metrics.Metrics` beyond the turn path: model calls, queues, breakers.

* `ModelMetering`: runtime hooks that count each model call that answered, its tokens and
  its cost (priced as the ledger prices it), and log it at debug level.
* `queue_probe`: at scrape time, each work queue's depth and oldest entry's age and the dead
  letters of them all, read from the bus.
* `mailbox_probe`: at scrape time, the inbound work waiting in the sessions' mailboxes.
* `breaker_probe`: at scrape time, which providers' circuit breakers refuse calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from core.bus.base import Bus
from core.bus.stats import QueueStatsReader
from core.hooks import ModelCompletion, NoHooks
from core.mailbox.base import Mailboxes
from core.messages import Usage
from core.metrics import Metrics, Probe
from core.providers.base import ModelRequest, Provider
from core.providers.reliable import BreakerState, CircuitBreaker, FallbackProvider, ReliableProvider

__all__ = ["ModelMetering", "breaker_probe", "breakers_of", "mailbox_probe", "queue_probe"]

log = logging.getLogger(__name__)

Price = Callable[[str, Usage], float | None]


class ModelMetering(NoHooks):
    """Counts model calls, tokens and cost per (provider, model), and logs each call."""

    def __init__(self, metrics: Metrics, *, provider: str, cost: Price | None = None) -> None:
        """`provider` names calls whose answer did not say who answered."""
        self.metrics = metrics
        self._provider = provider
        self._cost = cost

    async def after_model(self, request: ModelRequest, completion: ModelCompletion) -> None:
        """Record one answered call."""
        finished = completion.finished
        provider = finished.provider or self._provider
        model = finished.model or request.model
        usage = finished.usage
        m = self.metrics
        m.model_calls.labels(provider=provider, model=model).inc()
        for kind, count in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            if count:
                m.model_tokens.labels(provider=provider, model=model, kind=kind).inc(count)
        cost = self._cost(model, usage) if self._cost is not None else None
        if cost:
            m.cost_usd.labels(provider=provider, model=model).inc(cost)
        log.debug(
            "model call %s/%s: %d input, %d output tokens, %d tool calls, stop %s, cost %s",
            provider,
            model,
            usage.input_tokens,
            usage.output_tokens,
            len(completion.tool_calls),
            finished.stop_reason,
            "unknown" if cost is None else f"${cost:.6f}",
        )


def queue_probe(bus: Bus, queues: Callable[[], Sequence[str]]) -> Probe:
    """Sets `switchboard_queue_depth`, `_queue_oldest_seconds` (per queue) and
    `switchboard_dead_letters` (all of them) from the bus; nothing if the bus cannot say."""

    async def probe(metrics: Metrics) -> None:
        if not isinstance(bus, QueueStatsReader):
            return
        dead = 0
        for queue in queues():
            stats = await bus.queue_stats(queue)
            metrics.queue_depth.labels(queue=queue).set(stats.depth)
            metrics.queue_oldest_seconds.labels(queue=queue).set(stats.oldest_seconds)
            dead += stats.dead
        metrics.dead_letters.set(dead)

    return probe


def mailbox_probe(mailboxes: Mailboxes) -> Probe:
    """Sets `switchboard_mailbox_waiting`: the inbound work waiting in the sessions' mailboxes."""

    async def probe(metrics: Metrics) -> None:
        metrics.mailbox_waiting.set(await mailboxes.waiting())

    return probe


def breakers_of(provider: Provider) -> dict[str, CircuitBreaker]:
    """The circuit breaker of each provider in a (fallback chain of) reliable provider(s)."""
    if isinstance(provider, ReliableProvider):
        return {provider.name: provider.breaker}
    if isinstance(provider, FallbackProvider):
        found: dict[str, CircuitBreaker] = {}
        for link, _ in provider.chain:
            found.update(breakers_of(link))
        return found
    return {}


def breaker_probe(breakers: dict[str, CircuitBreaker]) -> Probe:
    """Sets `switchboard_provider_breaker_open` to 1 for each breaker refusing calls now."""

    async def probe(metrics: Metrics) -> None:
        for name, breaker in breakers.items():
            metrics.breaker_open.labels(provider=name).set(breaker.state is BreakerState.OPEN)

    return probe
