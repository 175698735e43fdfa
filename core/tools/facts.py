"""The memory tools: a person can ask the bot to remember, recall and forget facts about them.

Every call works in the asking person's own scope (this bot's profile, the turn's platform and
user), so nobody reads or forgets another person's facts: within `safe-chat`. A scheduled run
may recall but not change memory, since nobody is there to have asked for it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from core.errors import ToolError
from core.facts import MAX_FACT_CHARS, MAX_FACTS_PER_SCOPE, keep_fact, memory_scope
from core.redact import Redactor
from core.store.facts import FactStore
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = ["MAX_FACTS_PER_SCOPE", "memory_tools"]


class RememberArgs(BaseModel):
    """A fact to keep about the person asking."""

    text: str = Field(
        min_length=1,
        max_length=MAX_FACT_CHARS,
        description=(
            "The fact, self-contained and in the third person, e.g. 'Prefers answers in French' "
            "or 'Their dog is called Rex'."
        ),
    )


class RecallArgs(BaseModel):
    """What to look for in the person's remembered facts."""

    query: str = Field(
        default="",
        max_length=500,
        description="Words to search for; empty lists the most recent facts.",
    )
    limit: int = Field(default=5, ge=1, le=20, description="At most this many facts.")


class ForgetArgs(BaseModel):
    """One remembered fact, by the id shown when it was remembered or recalled."""

    fact_id: str = Field(min_length=1, max_length=64)


def memory_tools(store: FactStore, profile: str, redactor: Redactor) -> list[Tool[Any]]:
    """`remember`, `recall` and `forget` over `store`, for the bot of profile `profile`.

    `remember` refuses what `redactor` would scrub: a remembered fact goes back into the
    context of every later turn of that person, so a credential must never become one."""
    if not profile:
        raise ValueError("memory tools need a profile name")
    memory = _Memory(store, profile, redactor)
    return [
        Tool(
            name="remember",
            description=(
                "Remember a fact about the person you are talking to, for later conversations: "
                "a preference, a name, a detail they asked you to keep. One fact per call."
            ),
            args=RememberArgs,
            tier=SafetyTier.SIDE_EFFECTING,
            run=memory.remember,
        ),
        Tool(
            name="recall",
            description=(
                "Search the facts remembered about the person you are talking to. Shows each "
                "fact's id and the day it was remembered."
            ),
            args=RecallArgs,
            tier=SafetyTier.READ_ONLY,
            run=memory.recall,
        ),
        Tool(
            name="forget",
            description="Forget a remembered fact about the person you are talking to, by id.",
            args=ForgetArgs,
            tier=SafetyTier.SIDE_EFFECTING,
            run=memory.forget,
        ),
    ]


class _Memory:
    """What the memory tools do, over one bot's facts."""

    def __init__(self, store: FactStore, profile: str, redactor: Redactor) -> None:
        self.store = store
        self.profile = profile
        self.redactor = redactor

    async def remember(self, args: RememberArgs, context: ToolContext) -> str:
        if context.scheduled:
            raise ToolError("A scheduled task cannot change memory.")
        scope = _scope(self.profile, context)
        text = args.text.strip()
        if not text:
            raise ToolError("Give the fact to remember as text.")
        kept, fact = await keep_fact(
            self.store,
            scope,
            text,
            redactor=self.redactor,
            now=context.clock(),
            source="tool",
            source_session=context.session_id or None,
        )
        if kept == "credential":
            raise ToolError(
                "That looks like a password, key or token, and credentials are never kept in "
                "memory. Do not store it; suggest a password manager instead."
            )
        if kept == "full" or fact is None:
            raise ToolError(
                f"Memory is full ({MAX_FACTS_PER_SCOPE} facts); forget some before adding more."
            )
        if kept == "duplicate":
            return f"Already remembered as {fact.id}: {text}"
        return f"Remembered {fact.id}: {text}"

    async def recall(self, args: RecallArgs, context: ToolContext) -> str:
        scope = _scope(self.profile, context)
        found = await self.store.search_facts(scope, args.query, limit=args.limit)
        if not found:
            return "Nothing remembered matches that." if args.query.strip() else "Memory is empty."
        return "\n".join(f"{f.id} ({f.created_at:%Y-%m-%d}): {f.text}" for f in found)

    async def forget(self, args: ForgetArgs, context: ToolContext) -> str:
        if context.scheduled:
            raise ToolError("A scheduled task cannot change memory.")
        fact_id = args.fact_id.strip()
        if not await self.store.forget_fact(_scope(self.profile, context), fact_id):
            raise ToolError(f"No remembered fact {fact_id!r}; recall to see the ids.")
        return f"Forgot {fact_id}."


def _scope(profile: str, context: ToolContext) -> str:
    try:
        return memory_scope(profile, context.platform, context.user_id, scheduled=context.scheduled)
    except ValueError:
        raise ToolError(
            "Memory needs to know who is asking, and this turn has no person."
        ) from None
