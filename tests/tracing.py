"""Spans recorded in memory: the test process's one OpenTelemetry SDK provider.

The API lets a process set its provider once, so the first test that asks for the exporter
installs it for the rest of the run; each ask starts from an empty exporter and turns sampling
on until the test ends (`stop_recording`, called after every test by tests/conftest.py): the
other tests of the run see spans that do not record, as with tracing off, and envelopes without
a `traceparent`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes

__all__ = ["named", "recorded_spans", "span_ending", "stop_recording", "trace_ids"]


class _Endings(SpanProcessor):
    """Resolves the futures waiting for a span that matches when one ends."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Callable[[ReadableSpan], bool], asyncio.Future[ReadableSpan]]] = []

    def on_end(self, span: ReadableSpan) -> None:
        for matches, future in list(self.waiting):
            if future.done() or future.get_loop().is_closed():
                self.waiting.remove((matches, future))  # a test that ended without it
            elif matches(span):
                future.get_loop().call_soon_threadsafe(_resolve, future, span)
                self.waiting.remove((matches, future))


def _resolve(future: asyncio.Future[ReadableSpan], span: ReadableSpan) -> None:
    if not future.done():
        future.set_result(span)


class _Switch(Sampler):
    """Samples every span while a test records, none otherwise."""

    def __init__(self) -> None:
        self.on = False

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        chosen = ALWAYS_ON if self.on else ALWAYS_OFF
        return chosen.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return "tests: on while a test records"


_EXPORTER: InMemorySpanExporter | None = None
_ENDINGS = _Endings()
_SWITCH = _Switch()


def recorded_spans() -> InMemorySpanExporter:
    """The exporter every span of this process ends in, emptied."""
    global _EXPORTER
    if _EXPORTER is None:
        _EXPORTER = InMemorySpanExporter()
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider.add_span_processor(_ENDINGS)
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    _SWITCH.on = True
    return _EXPORTER


def stop_recording() -> None:
    """Spans stop recording (and envelopes carry no `traceparent`) until the next ask."""
    _SWITCH.on = False


def span_ending(matches: Callable[[ReadableSpan], bool]) -> asyncio.Future[ReadableSpan]:
    """The next span to end that `matches` (ask before it can end: spans ended already are not
    looked at)."""
    future: asyncio.Future[ReadableSpan] = asyncio.get_running_loop().create_future()
    _ENDINGS.waiting.append((matches, future))
    return future


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called `name`, in the order they ended."""
    return [s for s in spans if s.name == name]


def trace_ids(spans: Sequence[ReadableSpan]) -> set[int]:
    """The distinct trace ids of `spans`."""
    return {s.context.trace_id for s in spans if s.context is not None}
