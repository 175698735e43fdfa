"""`switchboard serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` set exports its spans over OTLP/HTTP:
one Telegram message is one trace, from the update to the reply (issue 36 point 5).

The process talks to the Telegram Bot API fake and exports to the OTLP collector fake, both in
the test's event loop; the demo provider answers (with its calculator tool for arithmetic).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.processes import open_profiles
from tests.e2e.served import serve
from tests.fakes.otlp_collector import FakeCollector, ReceivedSpan
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e

DM = 555
START_PATIENCE = 20.0
STOP_PATIENCE = 5.0
# The exporter sends a batch this often (milliseconds): spans arrive while the test waits.
BATCH_DELAY = "100"
ASKED = "what is 6*7?"


def _reply_delivered(spans: list[ReceivedSpan]) -> bool:
    return any(
        s.name == "deliver" and s.attributes.get("switchboard.kind") == "reply" for s in spans
    )


async def test_serve_exports_one_trace_from_the_telegram_update_to_the_reply(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    fake = fake_telegram
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_", "OTEL_"))
    }
    async with FakeCollector() as collector:
        env.update(
            SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
            SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
            TELEGRAM_BOT_TOKEN=fake.token,
            TELEGRAM_API_URL=fake.url,
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
            OTEL_BSP_SCHEDULE_DELAY=BATCH_DELAY,
        )
        async with serve(env, tmp_path) as served:
            await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
            fake.private_text(DM, ASKED)
            await reply_containing(fake, DM, "The answer is 42")
            await collector.until(_reply_delivered, timeout=START_PATIENCE)
            assert await served.terminate(STOP_PATIENCE) == 0

    spans = collector.spans
    (put,) = [s for s in spans if s.name == "mailbox put"]
    trace = [s for s in spans if s.trace_id == put.trace_id]
    names = {s.name for s in trace}
    assert {"mailbox put", "mailbox claim", "turn", "model call", "tool call"} <= names
    assert {"outbound enqueue", "deliver"} <= names
    # The reply's delivery is in the message's trace, the child of the reply's enqueueing.
    (reply,) = [
        s
        for s in trace
        if s.name == "outbound enqueue" and s.attributes.get("switchboard.kind") == "reply"
    ]
    assert any(s.name == "deliver" and s.parent_span_id == reply.span_id for s in trace)
    (claim,) = [s for s in trace if s.name == "mailbox claim"]
    assert claim.parent_span_id == put.span_id
    model_calls = [s for s in trace if s.name == "model call"]
    assert all(isinstance(s.attributes.get("gen_ai.usage.input_tokens"), int) for s in model_calls)
    assert {s.service for s in spans} == {"switchboard-serve"}
    # Nothing the person wrote is in a span.
    assert not any(ASKED in str(value) for s in spans for value in s.attributes.values())
    assert "Traceback" not in served.log, served.log
