"""The LLM API fakes speak the real wire formats: the official SDKs, used directly, accept them.

Nothing from Switchboard is used here; if one of these fails after an SDK upgrade, the fake (not
our provider code) needs fixing first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from anthropic.types import ContentBlock, Message, MessageParam, TextBlock, ToolUseBlock
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam

from tests.fakes import (
    NO_SCRIPT_MESSAGE,
    Error,
    FakeAnthropic,
    FakeOpenAI,
    Stall,
    StreamError,
    Text,
    ToolUse,
)
from tests.fakes.fixtures import TEST_API_KEY, fake_anthropic, fake_openai

# The shared fixtures, named here so this module also runs without the project conftest.
SHARED_FIXTURES = (fake_anthropic, fake_openai)

LONG_TEXT = "".join(f"{i % 10}" if i % 97 else "\n" for i in range(10_000))
WEATHER = ("toolu_01", "get_weather", {"city": "Paris", "units": "metric", "days": [1, 2]})
CLOCK = ("toolu_02", "get_time", {"timezone": "Europe/Paris"})
# One user turn in each SDK's own message type: the fakes must accept what callers send.
USER_TURN: list[MessageParam] = [{"role": "user", "content": "hello"}]
GPT_USER_TURN: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def claude(fake_anthropic: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        api_key=TEST_API_KEY, base_url=fake_anthropic.url, max_retries=0
    ) as client:
        yield client


@pytest.fixture
async def gpt(fake_openai: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        api_key=TEST_API_KEY, base_url=fake_openai.url, max_retries=0
    ) as client:
        yield client


async def _claude_stream(client: anthropic.AsyncAnthropic) -> tuple[list[str], Message]:
    """Stream one turn; the event types seen and the SDK's final message."""
    async with client.messages.stream(
        model="claude-test", max_tokens=1024, messages=USER_TURN
    ) as stream:
        seen: list[str] = [event.type async for event in stream]
        return seen, await stream.get_final_message()


def _text(block: ContentBlock) -> str:
    """A text block's text; any other block fails the test."""
    assert isinstance(block, TextBlock), block
    return block.text


def _tool_use(block: ContentBlock) -> tuple[str, str, object]:
    """A tool-use block's id, name and input; any other block fails the test."""
    assert isinstance(block, ToolUseBlock), block
    return block.id, block.name, block.input


async def _gpt_stream(client: openai.AsyncOpenAI) -> dict[str, Any]:
    """Stream one turn and assemble it the way a provider must: text, tool calls by index."""
    stream = await client.chat.completions.create(
        model="gpt-test",
        messages=GPT_USER_TURN,
        stream=True,
        stream_options={"include_usage": True},
    )
    calls: dict[int, dict[str, Any]] = {}
    text, finish, usage, chunks = "", None, None, 0
    async for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            assert chunk.choices == []
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for fragment in choice.delta.tool_calls or []:
                call = calls.setdefault(fragment.index, {"id": None, "name": None, "args": []})
                if fragment.id:
                    assert call["id"] is None, "id only in a call's first fragment"
                    call["id"] = fragment.id
                if fragment.function and fragment.function.name:
                    call["name"] = fragment.function.name
                if fragment.function and fragment.function.arguments:
                    call["args"].append(fragment.function.arguments)
    return {"text": text, "calls": calls, "finish": finish, "usage": usage, "chunks": chunks}


async def _raw_post(url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, headers=headers, json=body) as response,
    ):
        return response.status, await response.text()


# --- Anthropic -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Hello there, how can I help?", LONG_TEXT])
async def test_anthropic_stream_reassembles_text(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic, text: str
) -> None:
    fake_anthropic.script(Text(text, chunk=7, input_tokens=120, cache_read=80, cache_write=5))

    seen, message = await _claude_stream(claude)

    assert [block.type for block in message.content] == ["text"]
    assert _text(message.content[0]) == text
    assert message.model == "claude-test"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 120
    assert message.usage.cache_read_input_tokens == 80
    assert message.usage.cache_creation_input_tokens == 5
    assert message.usage.output_tokens == len(text) // 4
    assert seen[:2] == ["message_start", "content_block_start"]
    assert seen[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert seen.count("content_block_delta") == -(-len(text) // 7)


async def test_anthropic_sse_frames_carry_event_and_typed_data(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(ToolUse([WEATHER], text="Let me look."))
    headers = {"x-api-key": TEST_API_KEY, "anthropic-version": "2023-06-01"}
    body = {"model": "m", "max_tokens": 10, "messages": USER_TURN, "stream": True}

    status, raw = await _raw_post(f"{fake_anthropic.url}/v1/messages", headers, body)

    assert status == 200
    frames = [frame.split("\n") for frame in raw.strip().split("\n\n")]
    for event_line, data_line in frames:
        name = event_line.removeprefix("event: ")
        assert json.loads(data_line.removeprefix("data: "))["type"] == name
    names = [frame[0].removeprefix("event: ") for frame in frames]
    assert names[:2] == ["message_start", "ping"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2


async def test_anthropic_parallel_tool_use_streams_json_fragments(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(ToolUse([WEATHER, CLOCK], text="Checking both.", output_tokens=33))

    seen, message = await _claude_stream(claude)

    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    assert _text(message.content[0]) == "Checking both."
    calls = [_tool_use(block) for block in message.content[1:]]
    assert calls == [WEATHER, CLOCK]
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 33
    assert seen.count("input_json") >= 2 * 3, "arguments arrive in several fragments"


async def test_anthropic_non_streamed_message(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(Text("plain", output_tokens=2), ToolUse([CLOCK]))

    text = await claude.messages.create(model="claude-x", max_tokens=64, messages=USER_TURN)
    tool = await claude.messages.create(model="claude-x", max_tokens=64, messages=USER_TURN)

    assert (_text(text.content[0]), text.stop_reason, text.usage.output_tokens) == (
        "plain",
        "end_turn",
        2,
    )
    assert _tool_use(tool.content[0])[2] == CLOCK[2]
    assert tool.stop_reason == "tool_use"


async def test_anthropic_records_requests_and_accepts_x_api_key(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(Text("one"), Text("two"))

    await claude.messages.create(
        model="claude-x", max_tokens=64, messages=USER_TURN, system="Be brief."
    )
    status, _ = await _raw_post(
        f"{fake_anthropic.url}/v1/messages",
        {"x-api-key": TEST_API_KEY, "anthropic-version": "2023-06-01"},
        {"model": "m", "max_tokens": 1, "messages": USER_TURN},
    )

    assert status == 200
    first, second = fake_anthropic.requests
    assert (first.method, first.path) == ("POST", "/v1/messages")
    assert first.json["system"] == "Be brief."
    assert first.json["messages"] == USER_TURN
    assert first.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert "anthropic-version" in first.headers
    assert second.headers["x-api-key"] == TEST_API_KEY
    assert fake_anthropic.pending == 0


async def test_anthropic_rejects_missing_version_without_taking_a_step(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(Text("kept"))

    status, raw = await _raw_post(
        f"{fake_anthropic.url}/v1/messages",
        {"x-api-key": TEST_API_KEY},
        {"model": "m", "max_tokens": 1, "messages": USER_TURN},
    )

    assert status == 400
    assert json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert fake_anthropic.pending == 1


async def test_anthropic_rate_limit_exposes_retry_after(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(Error(429, "rate_limit_error", "slow down", {"retry-after": "7"}))

    with pytest.raises(anthropic.RateLimitError) as caught:
        await claude.messages.create(model="m", max_tokens=64, messages=USER_TURN)

    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.type == "rate_limit_error"
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["message"] == "slow down"


@pytest.mark.parametrize(
    ("status", "kind", "raised"),
    [
        (529, "overloaded_error", anthropic.OverloadedError),
        (500, "api_error", anthropic.InternalServerError),
        (413, "request_too_large", anthropic.ContentTooLargeError),
        (400, "invalid_request_error", anthropic.BadRequestError),
        (403, "permission_error", anthropic.PermissionDeniedError),
    ],
)
async def test_anthropic_errors_raise_the_sdk_classes(
    fake_anthropic: FakeAnthropic,
    claude: anthropic.AsyncAnthropic,
    status: int,
    kind: str,
    raised: type[anthropic.APIStatusError],
) -> None:
    fake_anthropic.script(Error(status, kind))

    with pytest.raises(raised) as caught:
        async with claude.messages.stream(model="m", max_tokens=64, messages=USER_TURN) as stream:
            await stream.get_final_message()

    assert caught.value.status_code == status
    assert caught.value.type == kind


async def test_anthropic_overloaded_is_an_internal_server_error() -> None:
    # Code that catches InternalServerError for 5xx also catches the 529.
    assert issubclass(anthropic.OverloadedError, anthropic.InternalServerError)


async def test_anthropic_wrong_key_is_authentication_error(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.script(Text("unused"))

    async with anthropic.AsyncAnthropic(
        api_key="wrong", base_url=fake_anthropic.url, max_retries=0
    ) as client:
        with pytest.raises(anthropic.AuthenticationError):
            await client.messages.create(model="m", max_tokens=64, messages=USER_TURN)

    assert fake_anthropic.pending == 1


async def test_anthropic_error_mid_stream_raises_during_iteration(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(StreamError("overloaded_error", "Overloaded", after_text="Partial an"))
    received = ""

    with pytest.raises(anthropic.APIStatusError) as caught:
        async with claude.messages.stream(model="m", max_tokens=64, messages=USER_TURN) as stream:
            async for text in stream.text_stream:
                received += text

    assert received == "Partial an"
    assert caught.value.status_code == 200
    assert caught.value.type == "overloaded_error"
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["message"] == "Overloaded"


async def test_anthropic_exhausted_script_is_a_visible_500(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.InternalServerError, match=NO_SCRIPT_MESSAGE):
        await claude.messages.create(model="m", max_tokens=64, messages=USER_TURN)


async def test_anthropic_callable_step_answers_from_the_request(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    fake_anthropic.script(lambda body: Text(body["messages"][-1]["content"].upper()))

    _, message = await _claude_stream(claude)

    assert _text(message.content[0]) == "HELLO"


async def test_anthropic_async_step_and_stream_error_without_streaming(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    async def decide(body: dict[str, Any]) -> StreamError:
        return StreamError("overloaded_error", f"busy with {body['model']}")

    fake_anthropic.script(decide)

    # A request that did not ask to stream gets the same error as an HTTP status.
    with pytest.raises(anthropic.OverloadedError, match="busy with claude-x"):
        await claude.messages.create(model="claude-x", max_tokens=64, messages=USER_TURN)


async def test_unknown_paths_get_a_vendor_shaped_404(
    fake_anthropic: FakeAnthropic, claude: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.NotFoundError):
        await claude.models.list()

    assert fake_anthropic.requests[0].method == "GET"


async def test_anthropic_stall_times_the_client_out(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(Stall(30))

    async with anthropic.AsyncAnthropic(
        api_key=TEST_API_KEY, base_url=fake_anthropic.url, max_retries=0, timeout=0.2
    ) as client:
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(model="m", max_tokens=64, messages=USER_TURN)


# --- OpenAI --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Hello there, how can I help?", LONG_TEXT])
async def test_openai_stream_reassembles_text_and_reports_usage(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI, text: str
) -> None:
    fake_openai.script(Text(text, chunk=11, input_tokens=100, output_tokens=9, cache_read=64))

    result = await _gpt_stream(gpt)

    assert result["text"] == text
    assert result["finish"] == "stop"
    assert result["chunks"] == 1 + -(-len(text) // 11) + 2  # role, deltas, finish, usage
    usage = result["usage"]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (100, 9, 109)
    assert usage.prompt_tokens_details.cached_tokens == 64


async def test_openai_parallel_tool_calls_arrive_in_fragments(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI
) -> None:
    fake_openai.script(ToolUse([WEATHER, CLOCK], text="Checking.", input_tokens=40))

    result = await _gpt_stream(gpt)

    assert result["text"] == "Checking."
    assert result["finish"] == "tool_calls"
    calls = [
        (call["id"], call["name"], json.loads("".join(call["args"])))
        for _, call in sorted(result["calls"].items())
    ]
    assert calls == [WEATHER, CLOCK]
    assert all(len(call["args"]) >= 3 for call in result["calls"].values())
    assert result["usage"].prompt_tokens == 40


async def test_openai_non_streamed_completion(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI
) -> None:
    fake_openai.script(Text("plain", output_tokens=2), ToolUse([CLOCK]))

    text = await gpt.chat.completions.create(model="gpt-x", messages=GPT_USER_TURN)
    tool = await gpt.chat.completions.create(model="gpt-x", messages=GPT_USER_TURN)

    assert text.choices[0].message.content == "plain"
    assert text.usage is not None
    assert (text.choices[0].finish_reason, text.usage.completion_tokens) == ("stop", 2)
    assert text.model == "gpt-x"
    assert tool.choices[0].message.tool_calls is not None
    (call,) = tool.choices[0].message.tool_calls
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert (call.id, call.function.name) == CLOCK[:2]
    assert json.loads(call.function.arguments) == CLOCK[2]
    assert tool.choices[0].finish_reason == "tool_calls"


async def test_openai_records_requests(fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI) -> None:
    fake_openai.script(Text("ok"))

    await _gpt_stream(gpt)

    (recorded,) = fake_openai.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert recorded.json["model"] == "gpt-test"
    assert recorded.json["stream_options"] == {"include_usage": True}


async def test_openai_insufficient_quota_is_a_rate_limit_error_with_its_code(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI
) -> None:
    fake_openai.script(
        Error(429, "insufficient_quota", "You exceeded your current quota."),
        Error(429, "rate_limit_exceeded", "Rate limit reached.", {"retry-after": "2"}),
    )

    with pytest.raises(openai.RateLimitError) as quota:
        await gpt.chat.completions.create(model="m", messages=GPT_USER_TURN)
    with pytest.raises(openai.RateLimitError) as limit:
        await gpt.chat.completions.create(model="m", messages=GPT_USER_TURN, stream=True)

    assert quota.value.code == "insufficient_quota"
    assert isinstance(quota.value.body, dict)
    assert quota.value.body["code"] == "insufficient_quota"  # body is the inner error object
    assert quota.value.type == "insufficient_quota"
    assert limit.value.code == "rate_limit_exceeded"
    assert limit.value.response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    ("status", "kind", "raised"),
    [
        (500, "server_error", openai.InternalServerError),
        (404, "model_not_found", openai.NotFoundError),
        (400, "context_length_exceeded", openai.BadRequestError),
    ],
)
async def test_openai_errors_raise_the_sdk_classes(
    fake_openai: FakeOpenAI,
    gpt: openai.AsyncOpenAI,
    status: int,
    kind: str,
    raised: type[openai.APIStatusError],
) -> None:
    fake_openai.script(Error(status, kind))

    with pytest.raises(raised) as caught:
        await gpt.chat.completions.create(model="m", messages=GPT_USER_TURN)

    assert (caught.value.status_code, caught.value.code) == (status, kind)


async def test_openai_wrong_key_is_authentication_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Text("unused"))

    async with openai.AsyncOpenAI(api_key="sk-wrong-key", base_url=fake_openai.url) as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(model="m", messages=GPT_USER_TURN)

    assert caught.value.code == "invalid_api_key"
    assert fake_openai.pending == 1


async def test_openai_error_mid_stream_is_a_plain_api_error(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI
) -> None:
    fake_openai.script(StreamError("server_error", "The server had an error.", after_text="Par"))
    received = ""

    stream = await gpt.chat.completions.create(model="m", messages=GPT_USER_TURN, stream=True)
    with pytest.raises(openai.APIError) as caught:
        async for chunk in stream:
            received += chunk.choices[0].delta.content or ""

    # Not an APIStatusError: there is no status to classify by, only the code in the body.
    assert not isinstance(caught.value, openai.APIStatusError)
    assert received == "Par"
    assert caught.value.code == "server_error"
    assert caught.value.message == "The server had an error."


async def test_openai_rejects_stream_options_without_stream(
    fake_openai: FakeOpenAI, gpt: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await gpt.chat.completions.create(
            model="m", messages=GPT_USER_TURN, stream_options={"include_usage": True}
        )

    assert caught.value.param == "stream_options"


async def test_openai_exhausted_script_is_a_visible_500(gpt: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.InternalServerError, match=NO_SCRIPT_MESSAGE):
        await gpt.chat.completions.create(model="m", messages=GPT_USER_TURN)


async def test_openai_stall_times_the_client_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Stall(30))

    async with openai.AsyncOpenAI(
        api_key=TEST_API_KEY, base_url=fake_openai.url, max_retries=0, timeout=0.2
    ) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=GPT_USER_TURN, stream=True)


async def test_stall_ending_drops_the_connection(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Stall(0.01))

    async with openai.AsyncOpenAI(
        api_key=TEST_API_KEY, base_url=fake_openai.url, max_retries=0, timeout=5
    ) as client:
        with pytest.raises(openai.APIConnectionError) as caught:
            await client.chat.completions.create(model="m", messages=GPT_USER_TURN)

    assert not isinstance(caught.value, openai.APITimeoutError)
