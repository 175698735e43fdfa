"""`OpenAIProvider` (the official `openai` SDK inside) against the Chat Completions fake.

Covers the wire format we send, what we make of the streams we get back, error
classification, and the layers above the provider (retries, breaker and fallback, the runtime's
tools, cost ledger, budget and context-overflow handling) with real HTTP in between.
"""

from __future__ import annotations

import base64
import json

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
from tests.integration.conftest import MakeOpenAI
from tests.integration.helpers import (
    GPT,
    LONG_TEXT,
    PNG,
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

UNAVAILABLE = Error(503, "server_error", "The engine is currently overloaded.")
TOO_LONG = Error(
    400,
    "context_length_exceeded",
    "This model's maximum context length is 128000 tokens. "
    "However, your messages resulted in 250000 tokens.",
)


# --- streaming ------------------------------------------------------------------------------


async def test_streamed_text_arrives_as_several_deltas_then_one_finished(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    answer = "The quick brown fox jumps over the lazy dog."
    fake_openai.script(Text(answer, chunk=8, input_tokens=12, output_tokens=11))

    events = await collect(gpt, request(GPT))

    assert len(of_type(events, TextDelta)) == 6
    assert text_of(events) == answer
    assert events[-1] == Finished(
        stop_reason="end_turn",
        usage=Usage(input_tokens=12, output_tokens=11),
        provider="openai",
        model=GPT,
    )
    assert of_type(events, Finished) == [events[-1]]


async def test_a_long_answer_arrives_whole_through_complete(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text(LONG_TEXT))

    completion = await complete(gpt, request(GPT))

    assert completion.text == LONG_TEXT
    assert completion.stop_reason == "end_turn"


async def test_a_long_answer_arrives_whole_through_the_runtime(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text(LONG_TEXT))
    runtime = make_runtime(gpt, GPT, store)

    events = await run_turn(runtime, session_id, "tell me everything")

    assert completed(events).text == LONG_TEXT
    assert text_of(events) == LONG_TEXT
    assert (await store.list_messages(session_id))[-1].text == LONG_TEXT


# --- the request we send ---------------------------------------------------------------------


async def test_system_tools_and_image_go_out_in_the_chat_completions_format(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text("A tiny PNG."))
    spec = calculator_spec()

    await collect(
        gpt, request(GPT, image_message(), system="Be brief.", tools=[spec], max_tokens=321)
    )

    [sent] = fake_openai.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    body = sent.json
    assert (body["model"], body["stream"]) == (GPT, True)
    assert body["stream_options"] == {"include_usage": True}
    # Not api.openai.com: compatible servers mostly know only `max_tokens`.
    assert body["max_tokens"] == 321
    assert "max_completion_tokens" not in body
    png = base64.b64encode(PNG).decode("ascii")
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
    ]
    assert body["tools"][0]["function"]["parameters"]["properties"]["expression"]["type"] == (
        "string"
    )


@pytest.mark.parametrize(
    "failure",
    [
        Error(429, "rate_limit_exceeded", headers={"retry-after": "0"}),
        Error(500, "server_error"),
        UNAVAILABLE,
    ],
    ids=["429", "500", "503"],
)
async def test_the_sdk_does_not_retry_on_its_own(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider, failure: Error
) -> None:
    fake_openai.script(failure, Text("a retry would get this"))

    with pytest.raises(ProviderError):
        await collect(gpt, request(GPT))

    assert len(fake_openai.requests) == 1
    assert fake_openai.pending == 1


# --- tools through the runtime ---------------------------------------------------------------


async def test_a_tool_round_trip_runs_the_real_calculator_and_returns_its_result(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(
        ToolUse([("call_01", "calculator", {"expression": "17*23"})], text="Let me compute."),
        Text("17 times 23 is 391."),
    )
    runtime = make_runtime(gpt, GPT, store)

    events = await run_turn(runtime, session_id, "What is 17*23?")

    assert completed(events).text == "17 times 23 is 391."
    [requested] = of_type(events, ToolRequested)
    assert (requested.call_id, requested.name) == ("call_01", "calculator")
    [finished] = of_type(events, ToolFinished)
    assert (finished.output, finished.is_error) == ("17*23 = 391", False)
    first, second = (r.json for r in fake_openai.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["calculator", "current_time"]
    system, question, call, result = second["messages"]
    assert system["role"] == "system"
    assert question == {"role": "user", "content": "What is 17*23?"}
    assert call["role"] == "assistant"
    assert call["content"] == "Let me compute."
    [sent_call] = call["tool_calls"]
    assert (sent_call["id"], sent_call["type"]) == ("call_01", "function")
    assert sent_call["function"]["name"] == "calculator"
    assert json.loads(sent_call["function"]["arguments"]) == {"expression": "17*23"}
    assert result["role"] == "tool"
    assert result["tool_call_id"] == "call_01"
    assert "391" in result["content"]


async def test_parallel_tool_calls_both_run_and_both_results_go_back(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(
        ToolUse(
            [
                ("call_a", "calculator", {"expression": "17*23"}),
                ("call_b", "current_time", {"timezone": "UTC"}),
            ]
        ),
        Text("391, and it is 15:09 UTC."),
    )
    runtime = make_runtime(gpt, GPT, store)

    events = await run_turn(runtime, session_id, "17*23, and what time is it?")

    assert completed(events).text == "391, and it is 15:09 UTC."
    assert {e.call_id for e in of_type(events, ToolFinished)} == {"call_a", "call_b"}
    assert not any(e.is_error for e in of_type(events, ToolFinished))
    *_, call, first_result, second_result = fake_openai.requests[1].json["messages"]
    assert call["content"] is None
    assert [c["id"] for c in call["tool_calls"]] == ["call_a", "call_b"]
    results = {m["tool_call_id"]: m["content"] for m in (first_result, second_result)}
    assert {m["role"] for m in (first_result, second_result)} == {"tool"}
    assert results.keys() == {"call_a", "call_b"}
    assert "391" in results["call_a"]
    assert "2026-03-14 15:09:26" in results["call_b"]


async def test_tools_and_system_are_byte_identical_across_turns_of_a_session(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    # OpenAI caches prefixes automatically; they only hit if the prefix does not change.
    fake_openai.script(Text("Hello."), Text("Again."))
    runtime = make_runtime(gpt, GPT, store)

    completed(await run_turn(runtime, session_id, "hi"))
    completed(await run_turn(runtime, session_id, "hi again"))

    first, second = (r.json for r in fake_openai.requests)
    assert canonical(first["tools"]) == canonical(second["tools"])
    assert canonical(second["messages"][:2]) == canonical(first["messages"])


# --- usage and cost ----------------------------------------------------------------------------


async def test_cached_prompt_tokens_are_split_out_of_the_input_tokens(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text("cached", input_tokens=1200, output_tokens=30, cache_read=1000))

    events = await collect(gpt, request(GPT))

    [finished] = of_type(events, Finished)
    assert finished.usage == Usage(input_tokens=200, output_tokens=30, cache_read_tokens=1000)


async def test_cached_usage_and_its_cost_are_recorded_in_the_ledger(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text("cached", input_tokens=1200, output_tokens=30, cache_read=1000))
    runtime = make_runtime(gpt, GPT, store)

    events = await run_turn(runtime, session_id, "hi")

    # gpt-4o-mini per million tokens: $0.15 input, $0.60 output, $0.075 cache read.
    assert PRICES[GPT].model_dump() == {
        "input": 0.15,
        "output": 0.60,
        "cache_read": 0.075,
        "cache_write": 0,
    }
    expected = (200 * 0.15 + 30 * 0.60 + 1000 * 0.075) / 1_000_000  # $0.000123
    usage = Usage(input_tokens=200, output_tokens=30, cache_read_tokens=1000)
    assert completed(events).usage == usage
    assert completed(events).cost_usd == pytest.approx(expected)
    summary = await store.cost_summary(session_id)
    assert (summary.calls, summary.usage, summary.unpriced_calls) == (1, usage, 0)
    assert summary.cost_usd == pytest.approx(0.000123)


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (
            Error(429, "rate_limit_exceeded", "Rate limit reached", {"retry-after": "7"}),
            "rate_limit",
        ),
        (Error(429, "insufficient_quota", "You exceeded your current quota"), "billing"),
        (Error(401, "invalid_api_key", "Incorrect API key provided"), "auth"),
        (Error(404, "model_not_found", "The model `gpt-nope` does not exist"), "model_not_found"),
        (TOO_LONG, "context_overflow"),
        (Error(400, "content_filter", "The response was filtered"), "content_blocked"),
        (Error(400, "invalid_value", "Invalid value for 'temperature'"), "bad_request"),
        (Error(500, "server_error", "The server had an error"), "server"),
        (UNAVAILABLE, "overloaded"),
        (Error(504, "server_error", "Gateway timeout"), "timeout"),
    ],
    ids=lambda v: f"{v.status}-{v.kind}" if isinstance(v, Error) else v,
)
async def test_http_errors_are_classified(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider, failure: Error, kind: str
) -> None:
    fake_openai.script(failure)

    with pytest.raises(ProviderError) as caught:
        await collect(gpt, request(GPT))

    assert caught.value.kind == kind
    assert caught.value.provider == "openai"
    assert caught.value.retry_after == (7.0 if "retry-after" in failure.headers else None)


async def test_a_rejected_key_is_named_but_never_shown(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    # Even if the API echoed the key back, it must not reach logs through our message.
    fake_openai.script(Error(401, "invalid_api_key", f"Incorrect API key provided: {TEST_API_KEY}"))

    with pytest.raises(ProviderError) as caught:
        await collect(gpt, request(GPT))

    assert caught.value.kind == "auth"
    assert "OPENAI_API_KEY" in str(caught.value)
    assert TEST_API_KEY not in str(caught.value)


@pytest.mark.parametrize("key", ["wrong", "sk-proj-wrong-0123456789abcdef"])
async def test_a_wrong_key_is_an_auth_error(
    fake_openai: FakeOpenAI, make_openai: MakeOpenAI, key: str
) -> None:
    fake_openai.script(Text("never sent"))

    with pytest.raises(ProviderError) as caught:
        await collect(make_openai(api_key=key), request(GPT))

    assert caught.value.kind == "auth"
    assert "OPENAI_API_KEY" in str(caught.value)
    assert key not in str(caught.value)
    assert key[-4:] not in str(caught.value)
    assert fake_openai.pending == 1


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("server_error", "server"),
        ("rate_limit_exceeded", "rate_limit"),
        ("content_filter", "content_blocked"),
    ],
)
async def test_an_error_mid_stream_is_classified_after_the_text_so_far(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider, code: str, kind: str
) -> None:
    fake_openai.script(StreamError(code, "Something went wrong", after_text="Partial an"))
    received: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in gpt.stream(request(GPT)):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert "".join(received) == "Partial an"
    assert caught.value.kind == kind


async def test_a_stalled_answer_is_a_timeout(
    fake_openai: FakeOpenAI, make_openai: MakeOpenAI
) -> None:
    fake_openai.script(Stall(30))

    with pytest.raises(ProviderError) as caught:
        await collect(make_openai(timeout=0.3), request(GPT))

    assert caught.value.kind == "timeout"


# --- retries, breaker and fallback ------------------------------------------------------------


async def test_retry_after_is_honoured(fake_openai: FakeOpenAI, gpt: OpenAIProvider) -> None:
    fake_openai.script(
        Error(429, "rate_limit_exceeded", "Rate limit reached", {"retry-after": "3"}),
        Text("After the wait."),
    )
    sleep = RecordingSleep()
    reliable = ReliableProvider(gpt, policy=RetryPolicy(max_attempts=3), sleep=sleep)

    completion = await complete(reliable, request(GPT))

    assert completion.text == "After the wait."
    assert sleep.waits == [3.0]
    assert len(fake_openai.requests) == 2


@pytest.mark.parametrize("failure", [UNAVAILABLE, Error(500, "server_error")], ids=["503", "500"])
async def test_an_overload_or_server_error_is_retried_once(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider, failure: Error
) -> None:
    fake_openai.script(failure, Text("Second time lucky."))
    sleep = RecordingSleep()
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=5.0)
    reliable = ReliableProvider(gpt, policy=policy, sleep=sleep)

    completion = await complete(reliable, request(GPT))

    assert completion.text == "Second time lucky."
    assert len(sleep.waits) == 1
    assert 0 <= sleep.waits[0] <= 5.0
    assert len(fake_openai.requests) == 2


async def test_an_exhausted_quota_is_not_retried(
    fake_openai: FakeOpenAI, gpt: OpenAIProvider
) -> None:
    fake_openai.script(
        Error(429, "insufficient_quota", "You exceeded your current quota"), Text("x")
    )
    sleep = RecordingSleep()
    reliable = ReliableProvider(gpt, policy=RetryPolicy(max_attempts=3), sleep=sleep)

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(GPT))

    assert caught.value.kind == "billing"
    assert sleep.waits == []
    assert len(fake_openai.requests) == 1


async def test_an_open_breaker_sends_calls_to_the_fallback_without_trying_openai(
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    gpt: OpenAIProvider,
    claude: AnthropicProvider,
) -> None:
    fake_openai.script(*[UNAVAILABLE] * 10)
    fake_anthropic.script(Text("Claude here."), Text("Claude again."))
    breaker = CircuitBreaker(threshold=2, cooldown=30.0, clock=lambda: 0.0)
    primary = ReliableProvider(
        gpt, policy=RetryPolicy(max_attempts=4), breaker=breaker, sleep=RecordingSleep()
    )
    secondary = ReliableProvider(claude, sleep=RecordingSleep())
    chain = FallbackProvider([(primary, GPT), (secondary, "claude-haiku-4-5")])

    first = await complete(chain, request(GPT))

    assert first.text == "Claude here."
    assert fake_anthropic.requests[0].json["model"] == "claude-haiku-4-5"
    # Two overloads opened the breaker, which also ended the retries.
    assert len(fake_openai.requests) == 2
    assert breaker.state is BreakerState.OPEN

    events = await collect(chain, request(GPT))

    assert text_of(events) == "Claude again."
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert (finished.provider, finished.model) == ("anthropic", "claude-haiku-4-5")
    assert len(fake_openai.requests) == 2
    assert len(fake_anthropic.requests) == 2


# --- runtime budgets and context overflow ------------------------------------------------------


async def test_a_spent_budget_stops_the_next_turn_before_any_request(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(
        Text("An expensive answer.", input_tokens=10_000, output_tokens=1_000),
        Text("never sent"),
    )
    limits = RuntimeLimits(max_spend_usd=0.001)
    runtime = make_runtime(gpt, GPT, store, limits=limits)

    first = await run_turn(runtime, session_id, "hi")

    # 10,000 input tokens at $0.15 and 1,000 output tokens at $0.60 per million: $0.0021.
    assert completed(first).cost_usd == pytest.approx(0.0021)

    second = await run_turn(runtime, session_id, "and more")

    refusal = failed(second)
    assert refusal.failure == "budget"
    assert "0.001" in refusal.message
    assert len(fake_openai.requests) == 1
    assert fake_openai.pending == 1


async def test_a_context_overflow_drops_the_oldest_turns_and_keeps_the_store_whole(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(
        Text("answer 1"), Text("answer 2"), Text("answer 3"), TOO_LONG, Text("answer 4")
    )
    runtime = make_runtime(gpt, GPT, store)
    for n in (1, 2, 3):
        completed(await run_turn(runtime, session_id, f"question {n}"))

    events = await run_turn(runtime, session_id, "question 4")

    assert completed(events).text == "answer 4"
    overflowed, retried = (r.json["messages"] for r in fake_openai.requests[3:])
    assert [m["role"] for m in overflowed[:2]] == ["system", "user"]
    assert len(overflowed) == 8
    assert len(retried) < len(overflowed)
    assert retried[0] == overflowed[0]
    assert retried[1]["role"] == "user"
    assert retried[-1] == {"role": "user", "content": "question 4"}
    assert retried[1:] == overflowed[-(len(retried) - 1) :]
    stored = await store.list_messages(session_id)
    assert [(m.role, m.text) for m in stored] == [
        (role, f"{word} {n}")
        for n in (1, 2, 3, 4)
        for role, word in (("user", "question"), ("assistant", "answer"))
    ]
