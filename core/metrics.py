"""Prometheus metrics of one process: what it did (turns, model and tool calls, deliveries,
schedule runs) and how it is doing (queue depths, dead letters, open breakers).

Every metric lives in the `Metrics` object's own registry, made by the process and passed to
the parts that record; nothing registers itself at import time. `render()` is the text a
`/metrics` endpoint answers with; `refresh()` first runs the probes (queue sizes, breakers)
that read state at scrape time rather than being told of each change.

Where each is recorded: turns, first tokens and tool calls by `core.turns.Lifecycle`; model
calls, tokens and cost by `core.metering.ModelMetering` (runtime hooks); deliveries by
`channels.gateway.Gateway`; schedule runs by `core.turns.ScheduledRuns`; queues, dead letters
and breakers by the probes of `core.metering`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "Metrics", "Probe"]

log = logging.getLogger(__name__)

Probe = Callable[["Metrics"], Awaitable[None]]
"""Sets gauges from state read now (a scrape); may raise, which leaves them as they were."""

# A probe that takes longer than this is left behind: a scrape must answer quickly.
_PROBE_TIMEOUT: Final = 2.0

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a quick tool-less answer to a long tool-using turn.
_TURN_BUCKETS: Final = (0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)
_FIRST_TOKEN_BUCKETS: Final = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)


class Metrics:
    """The metrics of one process: one attribute per metric, labelled as its help says."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "switchboard_turns",
            "Turns answered, by platform, capability mode and outcome.",
            ["platform", "mode", "outcome"],
            registry=r,
        )
        self.turns_degraded = Counter(
            "switchboard_turns_degraded",
            "Turns run on the cheaper model (`[budgets] degrade_model`), by platform.",
            ["platform"],
            registry=r,
        )
        self.turn_seconds = Histogram(
            "switchboard_turn_seconds",
            "How long a turn took, from start to its last event.",
            ["platform"],
            buckets=_TURN_BUCKETS,
            registry=r,
        )
        self.first_token_seconds = Histogram(
            "switchboard_first_token_seconds",
            "From the start of a turn to the first text the model streamed.",
            ["platform"],
            buckets=_FIRST_TOKEN_BUCKETS,
            registry=r,
        )
        self.model_calls = Counter(
            "switchboard_model_calls",
            "Model calls that answered, by provider and model.",
            ["provider", "model"],
            registry=r,
        )
        self.model_tokens = Counter(
            "switchboard_model_tokens",
            "Tokens of answered model calls, by kind (input, output, cache_read, cache_write).",
            ["provider", "model", "kind"],
            registry=r,
        )
        self.cost_usd = Counter(
            "switchboard_cost_usd",
            "What model calls with a known price cost, in US dollars.",
            ["provider", "model"],
            registry=r,
        )
        self.tool_calls = Counter(
            "switchboard_tool_calls",
            "Tool calls, by tool and outcome (ok or error).",
            ["tool", "outcome"],
            registry=r,
        )
        self.deliveries = Counter(
            "switchboard_deliveries",
            "Deliveries a gateway showed or gave up, by platform and outcome.",
            ["platform", "outcome"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "switchboard_queue_depth",
            "Entries waiting in a work queue, when last looked at.",
            ["queue"],
            registry=r,
        )
        self.mailbox_waiting = Gauge(
            "switchboard_mailbox_waiting",
            "Inbound work waiting in the sessions' mailboxes (turns running or not begun), when"
            " last looked at.",
            registry=r,
        )
        self.queue_oldest_seconds = Gauge(
            "switchboard_queue_oldest_seconds",
            "Age of the oldest entry waiting in a work queue, when last looked at.",
            ["queue"],
            registry=r,
        )
        self.dead_letters = Gauge(
            "switchboard_dead_letters",
            "Entries in the dead-letter queues, when last looked at.",
            registry=r,
        )
        self.schedule_runs = Counter(
            "switchboard_schedule_runs",
            "Scheduled runs, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.breaker_open = Gauge(
            "switchboard_provider_breaker_open",
            "1 while a provider's circuit breaker refuses calls, else 0.",
            ["provider"],
            registry=r,
        )
        # The watchdog's view of each platform (`core/watchdog.py`), read at scrape time.
        self.platform_since_update = Gauge(
            "switchboard_platform_seconds_since_update",
            "Seconds since the platform's last update reached the gateway (NaN: none yet).",
            ["platform"],
            registry=r,
        )
        self.platform_since_delivery = Gauge(
            "switchboard_platform_seconds_since_delivery",
            "Seconds since the last delivery the platform accepted (NaN: none yet).",
            ["platform"],
            registry=r,
        )
        self.platform_poll_lag = Gauge(
            "switchboard_platform_poll_lag_seconds",
            "Seconds since the platform's last successful poll (NaN: not polled).",
            ["platform"],
            registry=r,
        )
        self.platform_failure_rate = Gauge(
            "switchboard_platform_delivery_failure_ratio",
            "Failed share of the platform's last 20 deliveries (NaN: none yet).",
            ["platform"],
            registry=r,
        )
        self.platform_incident = Gauge(
            "switchboard_platform_incident",
            "1 while the watchdog holds the platform silent or failing, else 0.",
            ["platform"],
            registry=r,
        )

        self._probes: list[Probe] = []

    def add_probe(self, probe: Probe) -> None:
        """Run `probe` before every render of `refresh()`."""
        self._probes.append(probe)

    async def refresh(self) -> None:
        """Run every probe (each within a bound); one that fails leaves its gauges as they were."""
        for probe in self._probes:
            try:
                async with asyncio.timeout(_PROBE_TIMEOUT):
                    await probe(self)
            except Exception as exc:
                log.debug("a metrics probe failed: %s", exc)

    def turn_ended(self, platform: str, mode: str, outcome: str, seconds: float | None) -> None:
        """One turn ended: count it, and how long it took when known."""
        self.turns.labels(platform=platform, mode=mode, outcome=outcome).inc()
        if seconds is not None:
            self.turn_seconds.labels(platform=platform).observe(seconds)

    def delivered(self, platform: str, outcome: str) -> None:
        """A gateway showed an outbound (`delivered`) or did not (`retried`, `dropped`...)."""
        self.deliveries.labels(platform=platform, outcome=outcome).inc()

    def render(self) -> bytes:
        """Every metric in the Prometheus text format."""
        return generate_latest(self.registry)
