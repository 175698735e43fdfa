"""Acceptance: a 300-turn conversation in a small context window.

Every request the model receives must fit the configured window (by the runtime's own
estimate, with the answer's `max_tokens` on top); the conversation is compacted along the
way and every turn is answered; the store still holds every message.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pydantic import BaseModel

from core.backends.sql.store import SqlStore
from core.compaction import Compactor
from core.context import estimate_text, estimate_tokens, estimate_tools
from core.events import Compacted, RunCompleted
from core.messages import Message, ToolCall
from core.modes import FULL
from core.providers.base import ModelRequest
from core.providers.scripted import Reply, ScriptedProvider, text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext, RuntimeLimits
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry

WINDOW = 4_000
MAX_TOKENS = 400
TURNS = 300
# Every so many turns the model calls a tool first, so compaction meets tool results too.
TOOL_EVERY = 7


class NoArgs(BaseModel):
    """The lookup tool takes no arguments."""


async def lookup(_args: NoArgs, _ctx: ToolContext) -> str:
    return "lookup result " + "x" * 150


def estimate(request: ModelRequest) -> int:
    return (
        estimate_text(request.system)
        + estimate_text(request.turn_context)
        + estimate_tools(request.tools)
        + sum(estimate_tokens(m) for m in request.messages)
    )


def check_well_formed(messages: list[Message]) -> None:
    asked: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        asked.update(c.id for c in message.tool_calls)
        if message.role == "tool":
            assert message.tool_call_id in asked, "a tool result without its call"
            answered.add(message.tool_call_id or "")
    assert asked == answered, "a tool call without its result"
    assert messages[0].role == "user"


def model_step(rng: random.Random, sizes: list[int]) -> Callable[[ModelRequest], Reply]:
    def step(request: ModelRequest) -> Reply:
        size = estimate(request)
        sizes.append(size)
        assert size + request.max_tokens <= WINDOW, f"request of ~{size} tokens sent"
        check_well_formed(request.messages)
        if request.system.startswith("You condense"):
            return text_reply("Summary: " + " ".join(rng.choice(WORDS) for _ in range(60)))
        last = request.messages[-1]
        if last.role == "user" and last.text.endswith(f"#{TOOL_EVERY}"):
            return tool_reply(ToolCall(id=f"call-{len(sizes)}", name="lookup"))
        return text_reply(sentence(rng, 200))

    return step


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


def sentence(rng: random.Random, chars: int) -> str:
    text = ""
    while len(text) < chars:
        text += rng.choice(WORDS) + " "
    return text[:chars]


async def test_a_300_turn_conversation_stays_in_a_small_window(store: SqlStore) -> None:
    rng = random.Random(300)
    sizes: list[int] = []
    provider = ScriptedProvider([model_step(rng, sizes)] * 2_000)
    runtime = AgentRuntime(
        provider=provider,
        model="tiny-model",
        tools=ToolRegistry(
            [
                Tool(
                    name="lookup",
                    description="Look up.",
                    args=NoArgs,
                    tier=SafetyTier.READ_ONLY,
                    run=lookup,
                )
            ]
        ),
        store=store,
        limits=RuntimeLimits(max_tokens=MAX_TOKENS),
        compactor=Compactor(provider, "tiny-model", keep_last=6, summary_max_tokens=300),
        context_window=WINDOW,
    )
    session = await store.current_session("terminal:default:long")
    context = ChannelContext(platform="terminal", mode=FULL, session_key=session.key)

    compactions: list[Compacted] = []
    tool_turns = 0
    for turn in range(1, TURNS + 1):
        marker = f"#{TOOL_EVERY}" if turn % TOOL_EVERY == 0 else ""
        text = f"turn {turn}: {sentence(rng, 190)}{marker}"
        events = [e async for e in runtime.run(session.id, Message.user(text), context)]
        assert isinstance(events[-1], RunCompleted), (turn, events[-1])
        assert events[-1].text
        compactions.extend(e for e in events if isinstance(e, Compacted))
        tool_turns += bool(marker)

    assert len(compactions) >= 10
    summary = await store.latest_summary(session.id)
    assert summary is not None and summary.text.startswith("Summary: ")
    assert max(sizes) + MAX_TOKENS <= WINDOW
    stored = await store.list_messages(session.id)
    assert len(stored) == 2 * TURNS + 2 * tool_turns
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
    assert sum(m.role == "user" for m in stored) == TURNS
    assert stored[0].text.startswith("turn 1: ")
    assert summary.up_to_seq < len(stored)
