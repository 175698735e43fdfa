"""Spans recorded in memory: the test process's one OpenTelemetry SDK provider.

The API lets a process set its provider once, so the first test that asks for the exporter
installs it for the rest of the run; each ask starts from an empty exporter. A process that
never asks (or a fresh interpreter) keeps the API's non-recording spans.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["named", "recorded_spans", "trace_ids"]

_EXPORTER: InMemorySpanExporter | None = None


def recorded_spans() -> InMemorySpanExporter:
    """The exporter every span of this process ends in, emptied."""
    global _EXPORTER
    if _EXPORTER is None:
        _EXPORTER = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called `name`, in the order they ended."""
    return [s for s in spans if s.name == name]


def trace_ids(spans: Sequence[ReadableSpan]) -> set[int]:
    """The distinct trace ids of `spans`."""
    return {s.context.trace_id for s in spans if s.context is not None}
