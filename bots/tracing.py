"""Where a long-running process's spans go: OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

Off otherwise, and then at no cost: the SDK is not even imported, so the spans of
`core/tracing.py` are the OpenTelemetry API's non-recording ones. On, the SDK reads the
standard `OTEL_*` variables itself (the endpoint, headers, timeouts, `OTEL_BSP_*` batching,
`OTEL_RESOURCE_ATTRIBUTES`); the service is named `switchboard-<role>` unless
`OTEL_SERVICE_NAME` names it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from opentelemetry import trace

from core.errors import ConfigError

__all__ = ["service_name", "traced", "tracing_wanted"]

# Either turns exporting on: the endpoint of every signal, or of traces alone.
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracing_wanted(environ: Mapping[str, str]) -> bool:
    """Whether spans are exported: an OTLP endpoint is set and the SDK not disabled.

    `ConfigError` for an endpoint that is not an http(s) URL (the exporter would only say so
    in a log line at each export)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    wanted = False
    for name in _ENDPOINTS:
        if not (value := environ.get(name, "").strip()):
            continue
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{name} must be an http:// or https:// URL, not {value!r}")
        wanted = True
    return wanted


def service_name(role: str, environ: Mapping[str, str]) -> str:
    """`OTEL_SERVICE_NAME`, else `switchboard-<role>` (`gateway telegram`: `-gateway-telegram`)."""
    named = environ.get("OTEL_SERVICE_NAME", "").strip()
    return named or "-".join(["switchboard", *role.split()])


@contextlib.contextmanager
def traced(role: str, environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """Export the process's spans while the block runs, if `tracing_wanted`; the spans still
    waiting are sent when it ends."""
    env = os.environ if environ is None else environ
    if not tracing_wanted(env):
        yield
        return
    # Imported here: a process that does not trace never loads the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name(role, env)}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        provider.shutdown()
