"""OpenTelemetry spans of the message path, and the trace context an envelope carries.

The core speaks only the OpenTelemetry API: with no SDK installed (`bots/tracing.py` installs
one when `OTEL_EXPORTER_OTLP_ENDPOINT` is set) every span is the API's non-recording span and
`traceparent()` is None, so tracing costs next to nothing when it is off.

One message is one trace: its producer puts it in a mailbox under a `mailbox put` span and the
envelope carries that span's W3C `traceparent` (`core/mailbox/intake.py`); the worker that
claims it goes on under `mailbox claim` (`core/worker.py`), whose children are the turn, its
model and tool calls and each `outbound enqueue` (`core/turns/outbox.py`); the `Outbound`
carries that span's `traceparent` to the gateway's `deliver` (`channels/gateway.py`).

Spans never hold what people wrote nor what the model answered: only names, ids and counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "MODEL_INPUT_TOKENS",
    "MODEL_NAME",
    "MODEL_OUTPUT_TOKENS",
    "MODEL_PROVIDER",
    "MODEL_RESPONSE",
    "TOOL_DURATION_MS",
    "TOOL_IS_ERROR",
    "TOOL_NAME",
    "handed_over",
    "span",
    "traceparent",
]

# Attribute names: the OpenTelemetry semantic conventions for generative AI where they exist.
MODEL_PROVIDER: Final = "gen_ai.provider.name"
MODEL_NAME: Final = "gen_ai.request.model"
MODEL_RESPONSE: Final = "gen_ai.response.model"
MODEL_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
MODEL_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_IS_ERROR: Final = "switchboard.tool.is_error"
TOOL_DURATION_MS: Final = "switchboard.tool.duration_ms"

# The API's proxy: it turns to the provider the process installs (bots/tracing.py) once there
# is one, and stays the no-op tracer while there is none.
_TRACER: Final = trace.get_tracer("switchboard")
_PROPAGATOR: Final = TraceContextTextMapPropagator()


@contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Context | None = None,
    attributes: Mapping[str, str | int | float | bool] | None = None,
) -> Iterator[Span]:
    """A span named `name`, current while the block runs (a child of the current one, or of
    `parent`); an exception leaving the block is recorded on it."""
    with _TRACER.start_as_current_span(
        name, context=parent, kind=kind, attributes=attributes
    ) as current:
        yield current


def traceparent() -> str | None:
    """The W3C `traceparent` of the current span, for an envelope to carry; None when no span
    records (tracing off, or a span the sampler left out: the next hop then decides for itself)
    or none is current."""
    if not trace.get_current_span().is_recording():
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def handed_over(value: str | None) -> Context | None:
    """The context a `traceparent` carried across a queue names, to continue its trace; None
    for none (or one that does not parse: the span then starts a trace of its own)."""
    if not value:
        return None
    context = _PROPAGATOR.extract({"traceparent": value})
    return context if trace.get_current_span(context).get_span_context().is_valid else None
