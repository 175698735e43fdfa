"""One Telegram message is one trace from the gateway to the reply (issue 36 point 5).

The real `TelegramAdapter` against the Bot API fake, a `Gateway` (the producer) and a `Worker`
as two separate parts over the embedded backends' real SQLite mailboxes and outbound queue, and
over Redis with clients of their own: the only thing linking their spans is the `traceparent`
each envelope carries.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel, SecretStr

from bots.platforms import REGISTERED
from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends import Backends
from core.backends.redis import open_distributed
from core.backends.redis.keys import RedisKeys
from core.backends.sql import open_embedded
from core.backends.sql.store import sqlite_url
from core.events import Finished
from core.messages import ToolCall, Usage
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.tracing import MODEL_INPUT_TOKENS, TOOL_NAME
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, PATIENCE, local_replies, unless_failed
from tests.integration.telegram_helpers import reply_containing
from tests.tracing import named, recorded_spans, span_ending, trace_ids
from tests.workers import build_worker

DM = 4242


class _Lookup(BaseModel):
    what: str


async def _lookup(_args: _Lookup, _ctx: ToolContext) -> str:
    return "the answer is 42"


def _runtime(store: object) -> AgentRuntime:
    script: list[ScriptStep] = [
        [
            ToolCall(id="c1", name="lookup", arguments={"what": "the answer"}),
            Finished(stop_reason="tool_use", usage=Usage(input_tokens=50, output_tokens=6)),
        ],
        text_reply("It is 42.", usage=Usage(input_tokens=70, output_tokens=5)),
    ]
    lookup = Tool(
        name="lookup",
        description="Looks something up.",
        args=_Lookup,
        tier=SafetyTier.READ_ONLY,
        run=_lookup,
    )
    return AgentRuntime(
        provider=ScriptedProvider(script),
        model="test-model",
        tools=ToolRegistry([lookup]),
        store=store,  # type: ignore[arg-type]
    )


def _is_reply_delivery(span: ReadableSpan) -> bool:
    return span.name == "deliver" and (span.attributes or {}).get("switchboard.kind") == "reply"


async def _one_message(
    fake: FakeTelegram, gateway_side: Backends, worker_side: Backends
) -> Sequence[ReadableSpan]:
    """A Telegram message answered by a worker on `worker_side` through a gateway on
    `gateway_side`; the spans recorded meanwhile."""
    exporter = recorded_spans()
    worker = build_worker(
        bus=worker_side.bus,
        store=worker_side.store,
        mailboxes=worker_side.mailboxes,
        runtime=_runtime(worker_side.store),
        policy=ChannelPolicy(modes=REGISTERED.default_modes()),
        commands=COMMANDS,
        prompt_hints=REGISTERED.prompt_hints(),
    )
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake.token), api_url=fake.url, poll_timeout=1),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    gateway = Gateway(
        adapter, gateway_side.bus, mailboxes=gateway_side.mailboxes, readiness=Readiness()
    )
    worker_task = asyncio.create_task(worker.run())
    gateway_task = asyncio.create_task(gateway.run())
    try:
        await unless_failed(fake.wait_idle_poll(timeout=PATIENCE), gateway_task)
        # The reply's delivery is the trace's last span: the test waits for it to end.
        reply_shown = span_ending(
            lambda s: (
                s.name == "deliver" and (s.attributes or {}).get("switchboard.kind") == "reply"
            )
        )
        fake.private_text(DM, "what is the answer?")
        await reply_containing(fake, DM, "It is 42.")
        async with asyncio.timeout(PATIENCE):
            await reply_shown
    finally:
        await gateway.stop()
        async with asyncio.timeout(PATIENCE):
            await gateway_task
        await worker.stop(grace=PATIENCE)
        async with asyncio.timeout(PATIENCE):
            await worker_task
    return exporter.get_finished_spans()


def _assert_one_trace(spans: Sequence[ReadableSpan]) -> None:
    (put,) = named(spans, "mailbox put")
    (claim,) = named(spans, "mailbox claim")
    (turn,) = named(spans, "turn")
    enqueued = named(spans, "outbound enqueue")
    delivered = named(spans, "deliver")
    assert enqueued and delivered
    # One trace across both hand-overs; each side's span is the child of the other's.
    assert len(trace_ids(spans)) == 1
    assert claim.parent is not None and claim.parent.span_id == put.context.span_id
    assert turn.parent is not None and turn.parent.span_id == claim.context.span_id
    reply = next(s for s in enqueued if (s.attributes or {})["switchboard.kind"] == "reply")
    assert any(
        s.parent is not None and s.parent.span_id == reply.context.span_id for s in delivered
    )
    tokens = [(s.attributes or {})[MODEL_INPUT_TOKENS] for s in named(spans, "model call")]
    assert tokens == [50, 70]
    assert [(s.attributes or {})[TOOL_NAME] for s in named(spans, "tool call")] == ["lookup"]


async def test_one_telegram_message_is_one_trace_over_the_sqlite_queues(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    async with open_embedded(
        sqlite_url(tmp_path / "store.db"), tmp_path / "queues.db", lease_seconds=30
    ) as backends:
        spans = await _one_message(fake_telegram, backends, backends)
    _assert_one_trace(spans)


async def test_one_telegram_message_is_one_trace_over_redis_between_two_processes_parts(
    fake_telegram: FakeTelegram, tmp_path: Path, redis_url: str
) -> None:
    # The gateway's side and the worker's each open their own clients, as two processes do:
    # what links their spans travels through Redis.
    store_url = sqlite_url(tmp_path / "store.db")
    keys = RedisKeys(f"t{uuid.uuid4().hex[:12]}")
    async with (
        open_distributed(
            store_url, redis_url, keys, bus_lease_seconds=30, turn_lease_seconds=30
        ) as gateway_side,
        open_distributed(
            store_url, redis_url, keys, bus_lease_seconds=30, turn_lease_seconds=30
        ) as worker_side,
    ):
        spans = await _one_message(fake_telegram, gateway_side, worker_side)
    _assert_one_trace(spans)
