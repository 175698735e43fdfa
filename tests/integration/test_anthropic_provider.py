"""`AnthropicProvider` (the official `anthropic` SDK inside) against the Messages API fake.

Covers the wire format we send, what we make of the streams we get back, error
classification, and the layers above the provider (retries, breaker and fallback, the runtime's
tools, cost ledger, budget and context-overflow handling) with real HTTP in between.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from core.backends.sql.store import SqlStore
from core.errors import ProviderError
from core.events import Finished, TextDelta, ToolFinished, ToolRequested
from core.messages import Usage
from core.pricing import PRICES
from core.providers.anthropic import AnthropicProvider
from core.providers.base import complete
from core.providers.openai import OpenAIProvider
from core.providers.reliable import (
    BreakerState,
    CircuitBreaker,
    FallbackProvider,
    ReliableProvider,
    RetryPolicy,
)
from core.runtime import RuntimeLimits
from tests.fakes import Error, FakeAnthropic, FakeOpenAI, Stall, StreamError, Text, ToolUse
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.conftest import MakeAnthropic
from tests.integration.helpers import (
    LONG_TEXT,
    PNG,
    SONNET,
    RecordingSleep,
    calculator_spec,
    canonical,
    collect,
    completed,
    failed,
    image_message,
    make_runtime,
    of_type,
    request,
    run_turn,
    text_of,
)

EPHEMERAL = {"type": "ephemeral"}
OVERLOADED = Error(529, "overloaded_error", "Overloaded")
TOO_LONG = Error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum")


def cache_marks(body: dict[str, Any]) -> list[str]:
    """Where the request carries `cache_control`, as readable paths."""
    marks = [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    marks += [f"system[{i}]" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for m, turn in enumerate(body["messages"]):
        marks += [
            f"messages[{m}][{b}]"
            for b, block in enumerate(turn["content"])
            if "cache_control" in block
        ]
    return marks


def unmarked(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Message turns without their cache breakpoints."""
    return [
        {
            **turn,
            "content": [
                {k: v for k, v in block.items() if k != "cache_control"}
                for block in turn["content"]
            ],
        }
        for turn in turns
    ]


# --- streaming ------------------------------------------------------------------------------


async def test_streamed_text_arrives_as_several_deltas_then_one_finished(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    fake_anthropic.script(Text(answer, chunk=8, input_tokens=12, output_tokens=11))

    events = await collect(claude, request(SONNET))

    deltas = of_type(events, TextDelta)
    assert len(deltas) == 6
    assert text_of(events) == answer
    assert events[-1] == Finished(
        stop_reason="end_turn",
        usage=Usage(input_tokens=12, output_tokens=11),
        provider="anthropic",
        model=SONNET,
    )
    assert of_type(events, Finished) == [events[-1]]


async def test_a_long_answer_arrives_whole_through_complete(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text(LONG_TEXT))

    completion = await complete(claude, request(SONNET))

    assert completion.text == LONG_TEXT
    assert completion.stop_reason == "end_turn"


async def test_a_long_answer_arrives_whole_through_the_runtime(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text(LONG_TEXT))
    runtime = make_runtime(claude, SONNET, store)

    events = await run_turn(runtime, session_id, "tell me everything")

    assert completed(events).text == LONG_TEXT
    assert text_of(events) == LONG_TEXT
    stored = await store.list_messages(session_id)
    assert stored[-1].text == LONG_TEXT


# --- the request we send ---------------------------------------------------------------------


async def test_system_tools_and_image_go_out_in_the_messages_api_format(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text("A tiny PNG."))
    spec = calculator_spec()

    await collect(
        claude,
        request(SONNET, image_message(), system="Be brief.", tools=[spec], max_tokens=321),
    )

    [sent] = fake_anthropic.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    body = sent.json
    assert (body["model"], body["max_tokens"], body["stream"]) == (SONNET, 321, True)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {
            "name": "calculator",
            "description": spec.description,
            "input_schema": spec.parameters,
            "cache_control": EPHEMERAL,
        }
    ]
    assert body["tools"][0]["input_schema"]["properties"]["expression"]["type"] == "string"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": base64.b64encode(PNG).decode("ascii"),
                    },
                    "cache_control": EPHEMERAL,
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    "failure",
    [
        Error(429, "rate_limit_error", headers={"retry-after": "0"}),
        Error(500, "api_error"),
        OVERLOADED,
    ],
    ids=["429", "500", "529"],
)
async def test_the_sdk_does_not_retry_on_its_own(
    fake_anthropic: FakeAnthropic, failure: Error, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(failure, Text("a retry would get this"))

    with pytest.raises(ProviderError):
        await collect(claude, request(SONNET))

    assert len(fake_anthropic.requests) == 1
    assert fake_anthropic.pending == 1


# --- tools through the runtime ---------------------------------------------------------------


async def test_a_tool_round_trip_runs_the_real_calculator_and_returns_its_result(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        ToolUse([("toolu_01", "calculator", {"expression": "17*23"})], text="Let me compute."),
        Text("17 times 23 is 391."),
    )
    runtime = make_runtime(claude, SONNET, store)

    events = await run_turn(runtime, session_id, "What is 17*23?")

    assert completed(events).text == "17 times 23 is 391."
    [requested] = of_type(events, ToolRequested)
    assert (requested.call_id, requested.name) == ("toolu_01", "calculator")
    [finished] = of_type(events, ToolFinished)
    assert (finished.output, finished.is_error) == ("17*23 = 391", False)
    first, second = (r.json for r in fake_anthropic.requests)
    assert [t["name"] for t in first["tools"]] == ["calculator", "current_time"]
    *_, question, call, result = second["messages"]
    assert question["role"] == "user"
    assert call["role"] == "assistant"
    assert call["content"] == [
        {"type": "text", "text": "Let me compute."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "calculator",
            "input": {"expression": "17*23"},
        },
    ]
    assert result["role"] == "user"
    [block] = result["content"]
    assert block["type"] == "tool_result"
    assert block["tool_use_id"] == "toolu_01"
    assert "391" in block["content"]
    assert block["is_error"] is False


async def test_parallel_tool_calls_both_run_and_both_results_go_back_together(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        ToolUse(
            [
                ("toolu_a", "calculator", {"expression": "17*23"}),
                ("toolu_b", "current_time", {"timezone": "UTC"}),
            ]
        ),
        Text("391, and it is 15:09 UTC."),
    )
    runtime = make_runtime(claude, SONNET, store)

    events = await run_turn(runtime, session_id, "17*23, and what time is it?")

    assert completed(events).text == "391, and it is 15:09 UTC."
    assert {e.call_id for e in of_type(events, ToolFinished)} == {"toolu_a", "toolu_b"}
    assert not any(e.is_error for e in of_type(events, ToolFinished))
    *_, call, result = fake_anthropic.requests[1].json["messages"]
    assert [(b["type"], b["id"]) for b in call["content"]] == [
        ("tool_use", "toolu_a"),
        ("tool_use", "toolu_b"),
    ]
    assert result["role"] == "user"
    results = {b["tool_use_id"]: b["content"] for b in result["content"]}
    assert results.keys() == {"toolu_a", "toolu_b"}
    assert "391" in results["toolu_a"]
    assert "2026-03-14 15:09:26" in results["toolu_b"]


# --- prompt caching ----------------------------------------------------------------------------


async def test_cache_breakpoints_sit_on_the_last_tool_the_system_and_the_newest_block(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        ToolUse([("toolu_01", "calculator", {"expression": "1+1"})]),
        Text("2"),
        Text("Still 2."),
    )
    runtime = make_runtime(claude, SONNET, store)

    await run_turn(runtime, session_id, "1+1?")
    await run_turn(runtime, session_id, "Sure?")

    marks = [cache_marks(r.json) for r in fake_anthropic.requests]
    assert marks == [
        ["tools[1]", "system[0]", "messages[0][0]"],
        # The tool result, merged into the user turn after the call.
        ["tools[1]", "system[0]", "messages[2][0]"],
        ["tools[1]", "system[0]", "messages[4][0]"],
    ]


async def test_tools_and_system_are_byte_identical_across_turns_of_a_session(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text("Hello.", cache_write=1800), Text("Again.", cache_read=1800))
    runtime = make_runtime(claude, SONNET, store)

    completed(await run_turn(runtime, session_id, "hi"))
    again = completed(await run_turn(runtime, session_id, "hi again"))

    assert again.usage.cache_read_tokens == 1800
    first, second = (r.json for r in fake_anthropic.requests)
    assert canonical(first["tools"]) == canonical(second["tools"])
    assert canonical(first["system"]) == canonical(second["system"])
    # The first request's conversation is a prefix of the second's (cache marks aside).
    assert unmarked(second["messages"])[:1] == unmarked(first["messages"])
    assert [t["role"] for t in second["messages"]] == ["user", "assistant", "user"]


async def test_cache_usage_is_reported_in_finished(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        Text("cached", input_tokens=100, output_tokens=50, cache_read=2000, cache_write=500)
    )

    events = await collect(claude, request(SONNET))

    [finished] = of_type(events, Finished)
    assert finished.usage == Usage(
        input_tokens=100, output_tokens=50, cache_read_tokens=2000, cache_write_tokens=500
    )


async def test_cache_usage_and_its_cost_are_recorded_in_the_ledger(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        Text("cached", input_tokens=100, output_tokens=50, cache_read=2000, cache_write=500)
    )
    runtime = make_runtime(claude, SONNET, store)

    events = await run_turn(runtime, session_id, "hi")

    # claude-sonnet-4-6 per million tokens: $3 input, $15 output, $0.30 cache read, $3.75 write.
    assert PRICES[SONNET].model_dump() == {
        "input": 3,
        "output": 15,
        "cache_read": 0.30,
        "cache_write": 3.75,
    }
    expected = (100 * 3 + 50 * 15 + 2000 * 0.30 + 500 * 3.75) / 1_000_000  # $0.003525
    usage = Usage(
        input_tokens=100, output_tokens=50, cache_read_tokens=2000, cache_write_tokens=500
    )
    assert completed(events).usage == usage
    assert completed(events).cost_usd == pytest.approx(expected)
    summary = await store.cost_summary(session_id)
    assert (summary.calls, summary.usage, summary.unpriced_calls) == (1, usage, 0)
    assert summary.cost_usd == pytest.approx(0.003525)


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (Error(429, "rate_limit_error", "Rate limited", {"retry-after": "7"}), "rate_limit"),
        (OVERLOADED, "overloaded"),
        (Error(500, "api_error", "Internal server error"), "server"),
        (Error(401, "authentication_error", "invalid x-api-key"), "auth"),
        (Error(403, "permission_error", "Your key may not use this model"), "auth"),
        (Error(404, "not_found_error", "model: claude-nope"), "model_not_found"),
        (TOO_LONG, "context_overflow"),
        (Error(413, "request_too_large", "Request exceeds the maximum size"), "context_overflow"),
        (
            Error(
                400,
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API.",
            ),
            "billing",
        ),
        (Error(400, "invalid_request_error", "messages: roles must alternate"), "bad_request"),
    ],
    ids=lambda v: f"{v.status}-{v.kind}" if isinstance(v, Error) else v,
)
async def test_http_errors_are_classified(
    fake_anthropic: FakeAnthropic, failure: Error, kind: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(failure)

    with pytest.raises(ProviderError) as caught:
        await collect(claude, request(SONNET))

    assert caught.value.kind == kind
    assert caught.value.provider == "anthropic"
    assert caught.value.retry_after == (7.0 if failure.status == 429 else None)


async def test_a_rejected_key_is_named_but_never_shown(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    # Even if the API echoed the key back, it must not reach logs through our message.
    fake_anthropic.script(Error(401, "authentication_error", f"invalid x-api-key {TEST_API_KEY}"))

    with pytest.raises(ProviderError) as caught:
        await collect(claude, request(SONNET))

    assert caught.value.kind == "auth"
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert TEST_API_KEY not in str(caught.value)


async def test_a_wrong_key_is_an_auth_error(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    secret = "sk-ant-wrong-0123456789"
    fake_anthropic.script(Text("never sent"))

    with pytest.raises(ProviderError) as caught:
        await collect(make_anthropic(api_key=secret), request(SONNET))

    assert caught.value.kind == "auth"
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert secret not in str(caught.value)
    assert fake_anthropic.pending == 1


async def test_an_error_mid_stream_is_classified_after_the_text_so_far(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(StreamError("overloaded_error", "Overloaded", after_text="Partial an"))
    received: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in claude.stream(request(SONNET)):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert "".join(received) == "Partial an"
    assert caught.value.kind == "overloaded"
    assert caught.value.retryable


async def test_a_stalled_answer_is_a_timeout(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(Stall(30))

    with pytest.raises(ProviderError) as caught:
        await collect(make_anthropic(timeout=0.3), request(SONNET))

    assert caught.value.kind == "timeout"


# --- retries, breaker and fallback ------------------------------------------------------------


async def test_retry_after_is_honoured(
    fake_anthropic: FakeAnthropic, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        Error(429, "rate_limit_error", "Rate limited", {"retry-after": "3"}),
        Text("After the wait."),
    )
    sleep = RecordingSleep()
    reliable = ReliableProvider(claude, policy=RetryPolicy(max_attempts=3), sleep=sleep)

    completion = await complete(reliable, request(SONNET))

    assert completion.text == "After the wait."
    assert sleep.waits == [3.0]
    assert len(fake_anthropic.requests) == 2


@pytest.mark.parametrize("failure", [OVERLOADED, Error(500, "api_error")], ids=["529", "500"])
async def test_an_overload_or_server_error_is_retried_once(
    fake_anthropic: FakeAnthropic, failure: Error, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(failure, Text("Second time lucky."))
    sleep = RecordingSleep()
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=5.0)
    reliable = ReliableProvider(claude, policy=policy, sleep=sleep)

    completion = await complete(reliable, request(SONNET))

    assert completion.text == "Second time lucky."
    assert len(sleep.waits) == 1
    assert 0 <= sleep.waits[0] <= 5.0
    assert len(fake_anthropic.requests) == 2


async def test_an_open_breaker_sends_calls_to_the_fallback_without_trying_anthropic(
    fake_anthropic: FakeAnthropic,
    fake_openai: FakeOpenAI,
    claude: AnthropicProvider,
    gpt: OpenAIProvider,
) -> None:
    fake_anthropic.script(*[OVERLOADED] * 10)
    fake_openai.script(Text("OpenAI here."), Text("OpenAI again."))
    breaker = CircuitBreaker(threshold=2, cooldown=30.0, clock=lambda: 0.0)
    primary = ReliableProvider(
        claude,
        policy=RetryPolicy(max_attempts=4),
        breaker=breaker,
        sleep=RecordingSleep(),
    )
    secondary = ReliableProvider(gpt, sleep=RecordingSleep())
    chain = FallbackProvider([(primary, SONNET), (secondary, "gpt-4.1-mini")])

    first = await complete(chain, request(SONNET))

    assert first.text == "OpenAI here."
    assert fake_openai.requests[0].json["model"] == "gpt-4.1-mini"
    # Two overloads opened the breaker, which also ended the retries.
    assert len(fake_anthropic.requests) == 2
    assert breaker.state is BreakerState.OPEN

    events = await collect(chain, request(SONNET))

    assert text_of(events) == "OpenAI again."
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert (finished.provider, finished.model) == ("openai", "gpt-4.1-mini")
    assert len(fake_anthropic.requests) == 2
    assert len(fake_openai.requests) == 2


# --- runtime budgets and context overflow ------------------------------------------------------


async def test_a_spent_budget_stops_the_next_turn_before_any_request(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        Text("An expensive answer.", input_tokens=10_000, output_tokens=1_000),
        Text("never sent"),
    )
    limits = RuntimeLimits(max_spend_usd=0.001)
    runtime = make_runtime(claude, SONNET, store, limits=limits)

    first = await run_turn(runtime, session_id, "hi")

    # 10,000 input tokens at $3 and 1,000 output tokens at $15 per million: $0.045.
    assert completed(first).cost_usd == pytest.approx(0.045)

    second = await run_turn(runtime, session_id, "and more")

    refusal = failed(second)
    assert refusal.failure == "budget"
    assert "0.001" in refusal.message
    assert len(fake_anthropic.requests) == 1
    assert fake_anthropic.pending == 1


async def test_a_context_overflow_drops_the_oldest_turns_and_keeps_the_store_whole(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(
        Text("answer 1"), Text("answer 2"), Text("answer 3"), TOO_LONG, Text("answer 4")
    )
    runtime = make_runtime(claude, SONNET, store)
    for n in (1, 2, 3):
        completed(await run_turn(runtime, session_id, f"question {n}"))

    events = await run_turn(runtime, session_id, "question 4")

    assert completed(events).text == "answer 4"
    overflowed, retried = (r.json["messages"] for r in fake_anthropic.requests[3:])
    assert len(overflowed) == 7
    assert len(retried) < len(overflowed)
    assert retried[0]["role"] == "user"
    assert retried[-1] == overflowed[-1]
    assert retried[-1]["content"][0]["text"] == "question 4"
    assert retried == overflowed[-len(retried) :]
    stored = await store.list_messages(session_id)
    assert [(m.role, m.text) for m in stored] == [
        (role, f"{word} {n}")
        for n in (1, 2, 3, 4)
        for role, word in (("user", "question"), ("assistant", "answer"))
    ]


async def test_image_messages_survive_a_round_trip_through_the_runtime(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text("A one-pixel PNG."))
    runtime = make_runtime(claude, SONNET, store)

    events = await run_turn(runtime, session_id, image_message())

    assert completed(events).text == "A one-pixel PNG."
    [turn] = fake_anthropic.requests[0].json["messages"]
    assert turn["content"][1]["source"]["data"] == base64.b64encode(PNG).decode("ascii")
    # The store keeps the bytes apart, the message a reference to them.
    [kept] = (await store.list_messages(session_id))[0].images
    assert kept.ref is not None and await store.image(session_id, kept.ref) == PNG
