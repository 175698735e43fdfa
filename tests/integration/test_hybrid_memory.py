"""Hybrid memory through the memory tools: `HybridFacts` over the real SQLite store, embedding
with the real `openai` client against the `/v1/embeddings` fake (made-up vectors that meet on
shared words and a small table of synonyms, `tests/fakes/embeddings_api.py`)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bots.app import embedded
from bots.profiles import load_profile
from bots.settings import load_settings
from core.embeddings import EmbeddingFailed, OpenAIEmbedder
from core.facts import memory_block
from core.hybrid_facts import HybridFacts
from core.messages import Message
from core.modes import SAFE_CHAT
from core.redact import Redactor
from core.runtime import ChannelContext
from core.store import Store
from core.tools import Tool, ToolContext
from core.tools.facts import memory_tools
from tests.fakes.embeddings_api import FakeEmbeddings, fake_vector
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.llm_script import Text
from tests.fakes.openai_api import FakeOpenAI
from tests.profile_env import profile_env

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ALICE = ToolContext(
    session_id="s1", user_id="1", platform="telegram", scheduled=False, clock=lambda: NOW
)
SCOPE = "default:telegram:1"
MODEL = "text-embedding-3-small"


@pytest.fixture
async def embedder(fake_embeddings: FakeEmbeddings) -> AsyncIterator[OpenAIEmbedder]:
    embedder = OpenAIEmbedder(
        api_key=SecretStr(TEST_API_KEY),
        base_url=fake_embeddings.url,
        model=MODEL,
        dimensions=64,
        retry_wait=0.01,
    )
    yield embedder
    await embedder.aclose()


@pytest.fixture
def hybrid(store: Store, embedder: OpenAIEmbedder) -> HybridFacts:
    return HybridFacts(store, embedder, min_similarity=0.3)


def _tools(facts: Any) -> dict[str, Tool[Any]]:
    return {tool.name: tool for tool in memory_tools(facts, "default", Redactor())}


async def _remember(tools: dict[str, Tool[Any]], text: str) -> str:
    answer = await tools["remember"]({"text": text}, ALICE)
    match = re.fullmatch(r"Remembered (\w+): .*", answer)
    assert match is not None, answer
    return match.group(1)


async def test_a_remembered_fact_is_stored_with_its_embedding(
    store: Store, hybrid: HybridFacts, fake_embeddings: FakeEmbeddings
) -> None:
    fact_id = await _remember(_tools(hybrid), "Has a dog called Rex")

    ((fact, embedding),) = await store.fact_embeddings(SCOPE, MODEL)
    assert fact.id == fact_id
    assert embedding.vector == pytest.approx(fake_vector("Has a dog called Rex", 64), abs=1e-6)
    asked = fake_embeddings.requests[-1]
    assert asked.texts == ("Has a dog called Rex",)
    assert (asked.model, asked.dimensions, asked.api_key) == (MODEL, 64, TEST_API_KEY)


async def test_recall_finds_by_meaning_what_keyword_search_misses(
    store: Store, hybrid: HybridFacts
) -> None:
    tools = _tools(hybrid)
    dog = await _remember(tools, "Has a dog called Rex")
    await _remember(tools, "Likes green tea")
    await _remember(tools, "Works as a nurse in Lyon")

    keyword = await _tools(store)["recall"]({"query": "puppy name"}, ALICE)
    fused = await tools["recall"]({"query": "puppy name"}, ALICE)

    assert keyword == "Nothing remembered matches that."
    assert fused.splitlines() == [f"{dog} (2025-03-01): Has a dog called Rex"]


async def test_both_rankings_agreeing_put_a_fact_first(hybrid: HybridFacts) -> None:
    tools = _tools(hybrid)
    # By keyword (BM25, the shorter first): home, job. By similarity: job, career, home.
    home = await _remember(tools, "Grew up in Lyon")
    job = await _remember(tools, "Works as a nurse in Lyon")
    career = await _remember(tools, "Has a new career, changed profession")

    found = await hybrid.search_facts(SCOPE, "job lyon", limit=3)

    # job 1/(60+2) + 1/(60+1) beats home 1/(60+1) + 1/(60+3); career (no keyword match) has
    # only 1/(60+2).
    assert [f.id for f in found] == [job, home, career]


async def test_the_turns_memory_block_brings_the_facts_found_by_meaning(
    hybrid: HybridFacts,
) -> None:
    dog = await _remember(_tools(hybrid), "Has a dog called Rex")

    block = await memory_block(hybrid, SCOPE, "what should I feed my puppy?")

    assert f"[{dog}]" in block and "Rex" in block


async def test_a_fact_whose_embedding_fails_is_kept_and_found_by_keyword(
    store: Store, hybrid: HybridFacts, fake_embeddings: FakeEmbeddings
) -> None:
    tools = _tools(hybrid)
    cat = await _remember(tools, "Has a cat called Tom")
    # Both tries of the duplicate check's search, then both of the fact's own embedding.
    fake_embeddings.fail(500, 500, 500, 500)

    fact_id = await _remember(tools, "Has a dog called Rex")

    assert [f.id for f, _ in await store.fact_embeddings(SCOPE, MODEL)] == [cat]
    assert {f.id for f in await store.list_facts(SCOPE)} == {cat, fact_id}
    recalled = await tools["recall"]({"query": "dog"}, ALICE)
    assert recalled.startswith(f"{fact_id} (2025-03-01): Has a dog called Rex")


async def test_a_failed_request_is_tried_once_more(
    store: Store, hybrid: HybridFacts, fake_embeddings: FakeEmbeddings
) -> None:
    fake_embeddings.fail(503)

    (embedding,) = await hybrid.embedder.embed(["Has a dog called Rex"])

    assert len(fake_embeddings.requests) == 2
    assert len(embedding.vector) == 64


async def test_a_question_that_cannot_be_embedded_is_answered_by_keyword(
    hybrid: HybridFacts, fake_embeddings: FakeEmbeddings
) -> None:
    tools = _tools(hybrid)
    dog = await _remember(tools, "Has a dog called Rex")
    await _remember(tools, "Likes green tea")
    fake_embeddings.fail(500, 500, 500, 500)  # both tries of each search

    assert [f.id for f in await hybrid.search_facts(SCOPE, "dog Rex")] == [dog]
    assert await hybrid.search_facts(SCOPE, "puppy") == []
    assert [f.id for f in await hybrid.search_facts(SCOPE, "puppy")] == [dog]  # fails no more


async def test_a_wrong_key_fails_with_the_status_and_never_the_key(
    fake_embeddings: FakeEmbeddings,
) -> None:
    embedder = OpenAIEmbedder(
        api_key=SecretStr("sk-wrong-secret"), base_url=fake_embeddings.url, model=MODEL
    )
    try:
        with pytest.raises(EmbeddingFailed) as failed:
            await embedder.embed(["Has a dog"])
    finally:
        await embedder.aclose()

    assert str(failed.value) == "the embeddings endpoint answered HTTP 401"
    assert len(fake_embeddings.requests) == 1  # a 401 is not tried again


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_wiring_ranks_the_turns_memory_by_meaning_only_when_enabled(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeOpenAI,
    fake_embeddings: FakeEmbeddings,
    enabled: bool,
) -> None:
    profile_env(
        monkeypatch,
        tmp_path,
        f'[embeddings]\nenabled = {str(enabled).lower()}\nbase_url = "{fake_embeddings.url}"\n'
        'api_key_env = "EMBEDDINGS_KEY"\ndimensions = 64\n',
        SWITCHBOARD_PROVIDER="openai",
        OPENAI_API_KEY=TEST_API_KEY,
        OPENAI_BASE_URL=fake_openai.url,
        EMBEDDINGS_KEY=TEST_API_KEY,
    )
    fake_openai.script(Text("Your dog is Rex."))
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    person = ToolContext(session_id="s1", user_id="42", platform="telegram", clock=lambda: NOW)

    async with embedded(settings, profile) as parts:
        remembered = await parts.runtime.tools.get("remember")({"text": "Has a dog Rex"}, person)
        session = await parts.store.create_session("telegram:1:555")
        context = ChannelContext(platform="telegram", mode=SAFE_CHAT, user_id="42")
        async for _ in parts.runtime.run(session.id, Message.user("my puppy?"), context):
            pass
        stored = await parts.store.fact_embeddings("bot:telegram:42", MODEL)

    assert remembered.startswith("Remembered ")
    sent = json.dumps(fake_openai.requests[-1].json)
    assert ("Has a dog Rex" in sent) is enabled
    assert len(stored) == (1 if enabled else 0)
    assert bool(fake_embeddings.requests) is enabled
