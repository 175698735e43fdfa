"""Traces (core/tracing.py, bots/tracing.py): a turn's spans with its model and tool calls, the
trace context an envelope carries, and tracing off at no cost without an OTLP endpoint."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest
from pydantic import BaseModel

from bots.loop import run_process
from bots.settings import Settings
from bots.tracing import service_name, tracing_wanted
from core.backends.sql.store import SqlStore
from core.errors import ConfigError
from core.events import Finished
from core.messages import Message, ToolCall, Usage
from core.modes import FULL
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply
from core.runtime import AgentRuntime, ChannelContext
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.tracing import (
    MODEL_INPUT_TOKENS,
    MODEL_NAME,
    MODEL_OUTPUT_TOKENS,
    MODEL_PROVIDER,
    TOOL_DURATION_MS,
    TOOL_IS_ERROR,
    TOOL_NAME,
    handed_over,
    span,
    traceparent,
)
from tests.tracing import named, recorded_spans, stop_recording, trace_ids

# What the person wrote, and what the tool answered: neither may reach a span.
ASKED = "my card number is 4111 1111 1111 1111, look it up"
FOUND = "the card belongs to Alice Example"


class _Lookup(BaseModel):
    what: str


async def _lookup(_args: _Lookup, _ctx: ToolContext) -> str:
    return FOUND


def _runtime(store: SqlStore) -> AgentRuntime:
    calls = [
        ToolCall(id="c1", name="lookup", arguments={"what": ASKED}),
        ToolCall(id="c2", name="no_such_tool", arguments={}),
    ]
    script: list[ScriptStep] = [
        [*calls, Finished(stop_reason="tool_use", usage=Usage(input_tokens=120, output_tokens=7))],
        text_reply("All done.", usage=Usage(input_tokens=180, output_tokens=4)),
    ]
    lookup = Tool(
        name="lookup",
        description="Looks something up.",
        args=_Lookup,
        tier=SafetyTier.READ_ONLY,
        run=_lookup,
    )
    return AgentRuntime(
        provider=ScriptedProvider(script, name="scripted"),
        model="test-model",
        tools=ToolRegistry([lookup]),
        store=store,
    )


async def test_a_turn_with_a_tool_call_has_turn_model_and_tool_spans_with_token_counts(
    store: SqlStore, session_id: str
) -> None:
    exporter = recorded_spans()
    runtime = _runtime(store)
    context = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")
    async for _event in runtime.run(session_id, Message.user(ASKED), context):
        pass

    spans = exporter.get_finished_spans()
    (turn,) = named(spans, "turn")
    models = named(spans, "model call")
    tools = named(spans, "tool call")
    assert len(models) == 2 and len(tools) == 2
    assert trace_ids(spans) == {turn.context.trace_id}
    assert all(s.parent is not None and s.parent.span_id == turn.context.span_id for s in models)
    assert all(s.parent is not None and s.parent.span_id == turn.context.span_id for s in tools)
    assert [dict(s.attributes or {}) for s in models] == [
        {
            MODEL_PROVIDER: "scripted",
            MODEL_NAME: "test-model",
            "gen_ai.response.model": "test-model",
            MODEL_INPUT_TOKENS: input_tokens,
            MODEL_OUTPUT_TOKENS: output_tokens,
        }
        for input_tokens, output_tokens in ((120, 7), (180, 4))
    ]
    outcomes = {(s.attributes or {})[TOOL_NAME]: (s.attributes or {})[TOOL_IS_ERROR] for s in tools}
    assert outcomes == {"lookup": False, "no_such_tool": True}
    assert all(isinstance((s.attributes or {})[TOOL_DURATION_MS], float) for s in tools)
    assert (turn.attributes or {})["switchboard.platform"] == "terminal"
    # Names, ids and counts only: nothing the person wrote nor what a tool read.
    values = " ".join(str(v) for s in spans for v in (s.attributes or {}).values())
    assert "4111" not in values and "Alice" not in values


async def test_an_envelope_carries_the_trace_context_of_its_hand_over() -> None:
    exporter = recorded_spans()
    with span("mailbox put") as put:
        carried = traceparent()
    assert carried is not None
    version, trace_id, span_id, flags = carried.split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == put.get_span_context().trace_id
    assert int(span_id, 16) == put.get_span_context().span_id

    with span("mailbox claim", parent=handed_over(carried)):
        pass
    put_span, claim = exporter.get_finished_spans()
    assert claim.parent is not None and claim.parent.span_id == put_span.context.span_id
    assert len(trace_ids([put_span, claim])) == 1


def test_a_missing_or_unreadable_traceparent_starts_no_trace() -> None:
    assert handed_over(None) is None
    assert handed_over("") is None
    assert handed_over("not-a-traceparent") is None
    assert handed_over("00-" + "0" * 32 + "-" + "0" * 16 + "-01") is None


def test_exporting_is_on_only_with_an_otlp_endpoint() -> None:
    assert not tracing_wanted({})
    assert not tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "})
    assert tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    assert not tracing_wanted(disabled)


def test_an_endpoint_that_is_not_an_http_url_is_a_config_error() -> None:
    for value in ("collector:4318", "garbage", "ftp://collector"):
        with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT must be an http"):
            tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": value})


def test_the_service_is_named_after_the_process_role_unless_the_operator_names_it() -> None:
    assert service_name("serve", {}) == "switchboard-serve"
    assert service_name("gateway telegram", {}) == "switchboard-gateway-telegram"
    assert service_name("worker", {"OTEL_SERVICE_NAME": "bots-eu"}) == "bots-eu"


# A fresh interpreter: this one's tests install an SDK provider of their own.
_PROBE = """
import json, sys
from opentelemetry import trace
from bots.tracing import traced
from core.tracing import span, traceparent

with traced(sys.argv[1]):
    provider = trace.get_tracer_provider()
    # Started and never ended: nothing is exported (no collector listens).
    probe = trace.get_tracer("probe").start_span("probe")
    with span("turn") as turn:
        carried = traceparent()
    print(json.dumps({
        "provider": type(provider).__module__ + "." + type(provider).__name__,
        "service": getattr(getattr(provider, "resource", None), "attributes", {}).get(
            "service.name"
        ),
        "recording": probe.is_recording(),
        "traceparent": carried is not None,
        "sdk_loaded": any(name.startswith("opentelemetry.sdk") for name in sys.modules),
    }))
"""


def _probe(role: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, role],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=clean | env,
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_without_an_endpoint_no_sdk_provider_is_set_and_spans_do_not_record() -> None:
    found = _probe("serve")
    assert found == {
        "provider": "opentelemetry.trace.ProxyTracerProvider",
        "service": None,
        "recording": False,
        "traceparent": False,
        "sdk_loaded": False,
    }


def test_with_an_endpoint_the_sdk_records_under_the_process_role() -> None:
    # The span ended in the probe is sent at exit to an endpoint nobody listens on: the
    # exporter gives up after its timeout, which the probe keeps short.
    found = _probe(
        "gateway telegram",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    assert found == {
        "provider": "opentelemetry.sdk.trace.TracerProvider",
        "service": "switchboard-gateway-telegram",
        "recording": True,
        "traceparent": True,
        "sdk_loaded": True,
    }


async def _never_run() -> None:
    raise AssertionError("the process must not start")


def test_a_process_with_a_bad_endpoint_stops_with_one_line_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")
    main = _never_run()
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL"):
        run_process(Settings(_env_file=None), main, role="worker")
    # Closed, not left for the garbage collector to warn about.
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED


def test_a_span_the_sampler_leaves_out_hands_no_traceparent_on() -> None:
    """With an SDK installed but the span not sampled, an envelope carries nothing: the next
    hop decides for itself (and a process's tests do not see each other's traces)."""
    recorded_spans()
    with span("mailbox put"):
        assert traceparent() is not None
    stop_recording()
    with span("mailbox put"):
        assert traceparent() is None
