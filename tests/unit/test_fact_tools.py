"""The memory tools: `remember`, `recall` and `forget`, each within the asking person's scope."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from core.errors import ToolError
from core.facts import MAX_FACT_CHARS, MemoryFact, memory_scope
from core.modes import SAFE_CHAT, SAFE_CHAT_TOOLS
from core.redact import Redactor
from core.store import Store
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from core.tools.facts import MAX_FACTS_PER_SCOPE, memory_tools

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tools(store: Store) -> dict[str, Tool[Any]]:
    return {tool.name: tool for tool in memory_tools(store, "default", Redactor())}


def _as(
    user_id: str, *, platform: str = "telegram", scheduled: bool = False, session: str = "s1"
) -> ToolContext:
    return ToolContext(
        session_id=session,
        user_id=user_id,
        platform=platform,
        scheduled=scheduled,
        clock=lambda: NOW,
    )


ALICE = _as("1")
BOB = _as("2")


async def _remember(tools: dict[str, Tool[Any]], text: str, context: ToolContext) -> str:
    """Remember `text`; returns the new fact's id."""
    answer = await tools["remember"]({"text": text}, context)
    match = re.fullmatch(r"Remembered (\w+): .*", answer, flags=re.DOTALL)
    assert match is not None, answer
    return match.group(1)


def test_the_tools_have_their_tiers_and_are_safe_chat_tools(store: Store) -> None:
    registry = ToolRegistry(memory_tools(store, "default", Redactor()))

    tiers = {tool.name: tool.tier for tool in registry}
    assert tiers == {
        "remember": SafetyTier.SIDE_EFFECTING,
        "recall": SafetyTier.READ_ONLY,
        "forget": SafetyTier.SIDE_EFFECTING,
    }
    assert set(tiers) <= SAFE_CHAT_TOOLS
    assert [t.name for t in SAFE_CHAT.allowed_tools(registry)] == ["forget", "recall", "remember"]


def test_a_profile_name_is_required(store: Store) -> None:
    with pytest.raises(ValueError, match="profile"):
        memory_tools(store, "", Redactor())


async def test_remember_then_recall_finds_the_fact(
    tools: dict[str, Tool[Any]], store: Store
) -> None:
    fact_id = await _remember(tools, "  Their dog is called Rex  ", ALICE)

    answer = await tools["recall"]({"query": "what is the dog's name?"}, ALICE)

    assert answer == f"{fact_id} (2025-03-01): Their dog is called Rex"
    [fact] = await store.list_facts(memory_scope("default", "telegram", "1"))
    assert fact == MemoryFact(
        id=fact_id,
        scope="default:telegram:1",
        text="Their dog is called Rex",
        created_at=NOW,
        source_session="s1",
    )


async def test_recall_without_a_query_lists_the_newest_up_to_limit(
    tools: dict[str, Tool[Any]],
) -> None:
    assert await tools["recall"]({}, ALICE) == "Memory is empty."
    for text in ("Likes tea", "Lives in Oslo", "Works as a nurse"):
        await _remember(tools, text, ALICE)

    answer = await tools["recall"]({"limit": 2}, ALICE)

    assert len(answer.splitlines()) == 2
    assert await tools["recall"]({"query": "volcano"}, ALICE) == "Nothing remembered matches that."


async def test_one_person_cannot_recall_or_forget_anothers_facts(
    tools: dict[str, Tool[Any]],
) -> None:
    alices = await _remember(tools, "Alice's PIN hint is her cat", ALICE)

    assert "cat" not in await tools["recall"]({"query": "PIN hint cat"}, BOB)
    assert await tools["recall"]({}, BOB) == "Memory is empty."
    with pytest.raises(ToolError, match=alices):
        await tools["forget"]({"fact_id": alices}, BOB)
    assert alices in await tools["recall"]({"query": "cat"}, ALICE)


async def test_the_same_user_id_elsewhere_is_another_person(
    tools: dict[str, Tool[Any]], store: Store
) -> None:
    await _remember(tools, "Prefers metric units", ALICE)
    other_bot = {tool.name: tool for tool in memory_tools(store, "helper", Redactor())}

    assert await tools["recall"]({}, _as("1", platform="discord")) == "Memory is empty."
    assert await other_bot["recall"]({}, ALICE) == "Memory is empty."
    assert "metric" in await tools["recall"]({}, ALICE)


async def test_forget_removes_the_fact(tools: dict[str, Tool[Any]]) -> None:
    kept = await _remember(tools, "Allergic to cats", ALICE)
    gone = await _remember(tools, "Allergic to peanuts", ALICE)

    assert await tools["forget"]({"fact_id": f" {gone} "}, ALICE) == f"Forgot {gone}."

    assert await tools["recall"]({"query": "allergic"}, ALICE) == (
        f"{kept} (2025-03-01): Allergic to cats"
    )
    with pytest.raises(ToolError, match="No remembered fact"):
        await tools["forget"]({"fact_id": gone}, ALICE)


async def test_remembering_the_same_text_again_keeps_one_fact(
    tools: dict[str, Tool[Any]], store: Store
) -> None:
    fact_id = await _remember(tools, "Speaks Welsh", ALICE)

    answer = await tools["remember"]({"text": "Speaks Welsh"}, ALICE)

    assert answer == f"Already remembered as {fact_id}: Speaks Welsh"
    assert len(await store.list_facts("default:telegram:1")) == 1


async def test_a_scheduled_run_may_recall_but_not_change_memory(
    tools: dict[str, Tool[Any]],
) -> None:
    fact_id = await _remember(tools, "Standup is at 9:30", ALICE)
    # A scheduled run's user is the schedule's owner: `platform:user_id`.
    run = _as("telegram:1", scheduled=True)

    assert fact_id in await tools["recall"]({"query": "standup"}, run)
    with pytest.raises(ToolError, match="scheduled"):
        await tools["remember"]({"text": "Another fact"}, run)
    with pytest.raises(ToolError, match="scheduled"):
        await tools["forget"]({"fact_id": fact_id}, run)
    assert fact_id in await tools["recall"]({}, ALICE)


async def test_a_turn_without_a_person_is_refused(tools: dict[str, Tool[Any]]) -> None:
    for context in (_as(""), _as("1", platform="")):
        for name, arguments in (
            ("remember", {"text": "x"}),
            ("recall", {}),
            ("forget", {"fact_id": "f1"}),
        ):
            with pytest.raises(ToolError, match="who is asking"):
                await tools[name](arguments, context)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("remember", {}),
        ("remember", {"text": ""}),
        ("remember", {"text": "x" * (MAX_FACT_CHARS + 1)}),
        ("recall", {"query": "x" * 501}),
        ("recall", {"limit": 0}),
        ("recall", {"limit": 21}),
        ("forget", {}),
        ("forget", {"fact_id": ""}),
        ("forget", {"fact_id": "x" * 65}),
    ],
)
async def test_invalid_arguments_are_tool_errors(
    tools: dict[str, Tool[Any]], name: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(ToolError, match=f"Invalid arguments for {name}"):
        await tools[name](arguments, ALICE)


async def test_blank_text_is_refused(tools: dict[str, Tool[Any]], store: Store) -> None:
    with pytest.raises(ToolError, match="Give the fact"):
        await tools["remember"]({"text": " \n\t "}, ALICE)

    assert await store.list_facts("default:telegram:1") == []


async def test_the_longest_fact_is_accepted(tools: dict[str, Tool[Any]]) -> None:
    fact_id = await _remember(tools, "y" * MAX_FACT_CHARS, ALICE)

    assert fact_id in await tools["recall"]({}, ALICE)


async def test_a_full_memory_refuses_more_facts(tools: dict[str, Tool[Any]], store: Store) -> None:
    scope = "default:telegram:1"
    for number in range(MAX_FACTS_PER_SCOPE):
        await store.remember_fact(
            MemoryFact(id=f"f{number}", scope=scope, text=f"fact {number}", created_at=NOW)
        )

    with pytest.raises(ToolError, match="full"):
        await tools["remember"]({"text": "One more"}, ALICE)

    # Forgetting makes room; other people are unaffected.
    await tools["forget"]({"fact_id": "f0"}, ALICE)
    await _remember(tools, "One more", ALICE)
    await _remember(tools, "Bob's first fact", BOB)


@pytest.mark.parametrize(
    "pasted",
    [
        "my openai key is sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678",
        "aws: AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "the wifi password=Tr0ub4dor&3",
    ],
)
async def test_remember_refuses_a_credential_and_says_why(
    tools: dict[str, Tool[Any]], store: Store, pasted: str
) -> None:
    with pytest.raises(ToolError, match="credentials are never kept in memory"):
        await tools["remember"]({"text": pasted}, ALICE)

    assert await store.list_facts(memory_scope("default", "telegram", "1")) == []


async def test_remember_refuses_a_configured_secret_of_any_shape(store: Store) -> None:
    tools = {t.name: t for t in memory_tools(store, "default", Redactor(["plain-words-secret"]))}

    with pytest.raises(ToolError, match="credentials are never kept"):
        await tools["remember"]({"text": "the code is plain-words-secret"}, ALICE)
