"""A loopback fake of an OpenTelemetry collector's OTLP/HTTP traces endpoint.

`POST /v1/traces` with a protobuf `ExportTraceServiceRequest` (what the SDK's OTLP/HTTP
exporter sends; a gzip body when it asks) is decoded with `opentelemetry-proto` and each span
kept as a `ReceivedSpan`; the answer is an empty `ExportTraceServiceResponse`. Anything else
is a 4xx, as a collector answers. `url` is what `OTEL_EXPORTER_OTLP_ENDPOINT` is set to;
`until(predicate)` waits for the spans received to satisfy it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.local_server import LocalServer

__all__ = ["FakeCollector", "ReceivedSpan"]

_PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector received it; ids in hex, as a trace UI shows them."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, object] = field(default_factory=dict)


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class FakeCollector(LocalServer):
    """An OTLP/HTTP traces endpoint on 127.0.0.1."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._changed = asyncio.Condition()
        super().__init__()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`: the exporter adds `/v1/traces`."""
        return self.origin

    async def until(
        self,
        ready: Callable[[list[ReceivedSpan]], bool],
        timeout: float,  # noqa: ASYNC109
    ) -> None:
        """Wait until `ready(spans)` holds, checked whenever spans arrive."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: ready(self.spans))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        return app

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != _PROTOBUF:
            return web.Response(status=415, text=f"expected {_PROTOBUF}")
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest()
        try:
            export.ParseFromString(body)
        except DecodeError:
            return web.Response(status=400, text="not an ExportTraceServiceRequest")
        received: list[ReceivedSpan] = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service = str(resource.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        async with self._changed:
            self.spans.extend(received)
            self._changed.notify_all()
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type=_PROTOBUF)
