"""A model stream that goes silent after its first chunk is cut, as a dropped one is.

The fakes' `Hold` starts a stream (with some text, or none) and then sends nothing while the
connection stays open: a proxy holding a dead upstream. With the idle limit set, the real SDK
providers give up on it once the answer began and close the connection; the error is the one
a dropped stream gives, final after text (a retry would repeat the text). Before the answer
begins only the call's deadline applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.profiles import load_profile
from bots.providers import build_provider
from bots.settings import Settings
from core.backends.sql.store import SqlStore
from core.errors import ProviderError
from core.events import TextDelta
from core.failures import ANSWER_CUT_OFF
from core.providers.anthropic import AnthropicProvider
from core.providers.base import Provider, complete
from core.providers.openai import OpenAIProvider
from core.providers.reliable import ReliableProvider, RetryPolicy
from tests.fakes import FakeAnthropic, FakeOpenAI, Hold, Text
from tests.fakes.fixtures import TEST_API_KEY
from tests.integration.helpers import (
    GPT,
    SONNET,
    RecordingSleep,
    failed,
    make_runtime,
    request,
    run_turn,
    text_of,
)

# Short, so a stalled stream is given up on soon; the fakes send a whole answer at once.
IDLE = 0.2
PATIENCE = 5.0

Vendor = tuple[FakeAnthropic | FakeOpenAI, Provider, str]


@pytest.fixture(params=["anthropic", "openai"])
async def vendor(
    request: pytest.FixtureRequest, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> AsyncIterator[Vendor]:
    """Each vendor's fake and its real provider with the idle limit."""
    provider: AnthropicProvider | OpenAIProvider
    if request.param == "anthropic":
        provider = AnthropicProvider(
            api_key=TEST_API_KEY, base_url=fake_anthropic.url, stream_idle_timeout=IDLE
        )
        yield fake_anthropic, provider, SONNET
    else:
        provider = OpenAIProvider(
            api_key=TEST_API_KEY, base_url=fake_openai.url, stream_idle_timeout=IDLE
        )
        yield fake_openai, provider, GPT
    await provider.aclose()


async def test_a_stream_stalled_after_some_text_is_cut_after_that_text(vendor: Vendor) -> None:
    fake, provider, model = vendor
    fake.script(Hold("Once upon a time"))
    received: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request(model)):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert "".join(received) == "Once upon a time"
    assert caught.value.kind == "server"
    assert "stalled" in str(caught.value)
    assert "cut off before its end" in str(caught.value)
    # The provider let go of the connection: the fake saw its client go away.
    await asyncio.wait_for(fake.dropped.wait(), PATIENCE)


async def test_a_stream_stalled_after_text_is_not_retried(vendor: Vendor) -> None:
    """Text already went to the person: a retry would show the answer twice."""
    fake, provider, model = vendor
    fake.script(Hold("Half of it"), Text("never asked for"))
    reliable = ReliableProvider(
        provider, policy=RetryPolicy(max_attempts=3), sleep=RecordingSleep()
    )

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(model))

    assert "stalled" in str(caught.value)
    assert len(fake.requests) == 1
    assert fake.pending == 1


async def test_a_turn_whose_stream_stalls_says_the_answer_was_cut_off(
    vendor: Vendor, store: SqlStore, session_id: str
) -> None:
    """Through the runtime: the person saw the start, then is told it was cut off."""
    fake, provider, model = vendor
    fake.script(Hold("Once upon a time"))
    reliable = ReliableProvider(
        provider, policy=RetryPolicy(max_attempts=3), sleep=RecordingSleep()
    )

    events = await run_turn(make_runtime(reliable, model, store), session_id, "a story")

    assert text_of(events) == "Once upon a time"
    ended = failed(events)
    assert (ended.failure, ended.message) == ("provider", ANSWER_CUT_OFF)
    assert "stalled" in ended.detail
    assert len(fake.requests) == 1


async def test_before_the_answer_begins_only_the_calls_deadline_applies(vendor: Vendor) -> None:
    """The vendor's opening event came (`message_start`, the role chunk) but no piece of the
    answer: a model thinking or a server reading a long prompt, not a stalled stream."""
    fake, provider, model = vendor
    fake.script(Hold())
    deadline = 5 * IDLE
    reliable = ReliableProvider(provider, policy=RetryPolicy(max_attempts=1, call_timeout=deadline))

    with pytest.raises(ProviderError) as caught:
        await complete(reliable, request(model))

    assert caught.value.kind == "timeout"
    assert f"within {deadline:g}s" in str(caught.value)
    assert len(fake.requests) == 1


async def test_the_profiles_idle_limit_reaches_the_provider(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """`stream_idle_timeout` in profile.toml, the provider built as `bots/app.py` builds it."""
    folder = tmp_path / "profiles" / "quick"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(
        f'provider = "openai"\nmodel = "{GPT}"\nstream_idle_timeout = {IDLE}\n', encoding="utf-8"
    )
    profile = load_profile(tmp_path / "profiles", "quick")
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": TEST_API_KEY, "OPENAI_BASE_URL": fake_openai.url}
    )
    provider, resolved = build_provider(settings, profile)
    fake_openai.script(Hold("Once upon"))
    try:
        with pytest.raises(ProviderError) as caught:
            await complete(provider, request(resolved.model))
    finally:
        await provider.aclose()

    assert "stalled" in str(caught.value)
    assert len(fake_openai.requests) == 1
