"""Memory that consolidates itself: the model reads a stretch of conversation and says which
durable facts about the person it established.

`Consolidator.consolidate` makes ONE bounded provider call (`max_tokens`, a timeout) whose
answer must be a JSON object of the `ConsolidationAnswer` schema: facts to remember, and
remembered facts (by id) the conversation contradicted, each with its new text. New facts go
through `core.facts.keep_fact` as `remember` does (a credential is refused, a duplicate
skipped, a full memory refuses more) with source "consolidated" and the session's id; a
replaced fact is forgotten and its new text kept. The call is charged to the cost ledger as
the person's, so their budgets count it. An answer that is not the schema changes nothing.

Two passes call it (`docs/memory.md`): before a session is compacted, on the messages the
summary is about to stand in for (`AgentRuntime`), and after a quiet period, on the messages
since the last pass (`QuietConsolidation`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.budgets import BudgetGuard, Spender
from core.clock import utc_now
from core.envelopes import new_id
from core.facts import MAX_FACT_CHARS, MemoryFact, keep_fact, memory_scope
from core.messages import Message, Usage
from core.providers.base import ModelRequest, Provider, complete
from core.redact import Redactor
from core.scheduling.cadence import CadenceError, parse_duration
from core.store.facts import FactStore
from core.store.ledger import CostEntry, CostLedger
from core.store.log import ConversationLog
from core.store.processed import ProcessedMarks

__all__ = [
    "ConsolidationAnswer",
    "ConsolidationResult",
    "Consolidator",
    "MemorySettings",
    "QuietConsolidation",
    "QuietStore",
    "Replacement",
    "latest_stretch",
    "parse_answer",
]

log = logging.getLogger(__name__)

# At most this many facts of each kind in one answer; more is not a conversation's worth.
_MAX_PER_ANSWER: Final = 10
# The remembered facts shown to the model, so it can say which one a new fact replaces.
_KNOWN_SHOWN: Final = 50
# What one message may take of the transcript, and the transcript at most (its newest part).
_MAX_MESSAGE_CHARS: Final = 1_500
_MAX_TRANSCRIPT_CHARS: Final = 24_000
# The quiet-period pass reads at most this many of a session's newest messages.
_QUIET_MESSAGES: Final = 200
# The sessions of schedules' runs: nobody's conversation.
_SCHEDULED_PREFIX: Final = "scheduled:"

_SYSTEM: Final = (
    "You maintain a long-term memory of durable facts about one person (their name, family, "
    "pets, home, work, preferences, lasting plans). Read the conversation and the facts "
    "already remembered. Answer with ONE JSON object and nothing else, of this shape: "
    '{"remember": ["<new fact>", ...], "replace": [{"id": "<remembered id>", "text": '
    '"<corrected fact>"}, ...]}. "remember": facts the person established that are not '
    "remembered yet, each self-contained and in the third person ('Has a dog called Rex'). "
    '"replace": remembered facts the conversation contradicted, with their corrected text. '
    "Leave out passing details, the assistant's own statements, anything about other "
    "people only, and never include passwords, keys, tokens or other credentials. Both lists "
    "may be empty."
)


class MemorySettings(BaseModel):
    """The profile's `[memory]` table: memory consolidation (docs/memory.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Ask the model for durable facts before a session is compacted (and, with
    # `consolidate_after`, after a quiet period); false: never.
    consolidate: bool = True
    # A duration ("30m", "2h"): consolidate a conversation quiet for that long; None: never.
    consolidate_after: timedelta | None = None
    # The answer's length at most, in tokens.
    consolidate_max_tokens: int = Field(default=512, ge=64, le=8192)

    @field_validator("consolidate_after", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return timedelta(seconds=parse_duration(value))
            except CadenceError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def quiet_pass(self) -> timedelta | None:
        """How long a quiet period is before it is consolidated; None: no such pass."""
        return self.consolidate_after if self.consolidate else None


class Replacement(BaseModel):
    """A remembered fact the conversation contradicted, and its corrected text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS)


class ConsolidationAnswer(BaseModel):
    """The answer the model must give: facts to remember, facts to replace."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    remember: list[str] = Field(default_factory=list, max_length=_MAX_PER_ANSWER)
    replace: list[Replacement] = Field(default_factory=list, max_length=_MAX_PER_ANSWER)


@dataclass
class ConsolidationResult:
    """What one pass did: the facts stored, the ids replaced, what was refused or skipped."""

    remembered: list[MemoryFact] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    duplicates: int = 0
    # False when the call failed or its answer was not the schema (nothing changed).
    answered: bool = False
    usage: Usage = field(default_factory=Usage)


def parse_answer(text: str) -> ConsolidationAnswer | None:
    """The schema object of `text` (a Markdown code fence around it is tolerated); None when
    it is not one."""
    body = text.strip()
    if body.startswith("```"):
        body = body.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        return ConsolidationAnswer.model_validate(json.loads(body))
    except (ValueError, ValidationError):
        return None


class Consolidator:
    """Asks the model which durable facts a conversation established, and keeps them."""

    def __init__(
        self,
        *,
        profile: str,
        provider: Provider,
        model: str,
        facts: FactStore,
        ledger: CostLedger,
        redactor: Redactor,
        cost: Callable[[str, Usage], float | None] | None = None,
        budgets: BudgetGuard | None = None,
        max_tokens: int = 512,
        timeout: float = 60.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """For the bot of `profile`: one call on `provider` with `model`, at most
        `max_tokens` long and `timeout` seconds; `cost` prices its usage for the `ledger`.
        With `budgets`, no call is made for a person, chat or session past a budget."""
        if max_tokens < 1 or timeout <= 0:
            raise ValueError("max_tokens and timeout must be positive")
        self.profile = profile
        self.provider = provider
        self.model = model
        self.facts = facts
        self.ledger = ledger
        self.redactor = redactor
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.budgets = budgets
        self._cost = cost
        self._clock = clock

    async def consolidate(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        platform: str,
        user_id: str,
        chat: str | None = None,
    ) -> ConsolidationResult:
        """Ask once which facts about the person `platform:user_id` `messages` of
        `session_id` established; remember the new, replace the contradicted. The call is
        charged to that person (and to `chat`) in the ledger."""
        result = ConsolidationResult()
        scope = memory_scope(self.profile, platform, user_id)
        # A credential the person pasted never reaches the call (nor, so, a fact).
        transcript = self.redactor(_transcript(messages))
        if not transcript:
            return result
        user = f"{platform}:{user_id}"
        if self.budgets is not None:
            spender = Spender(session_id=session_id, user=user, chat=chat)
            if (hit := await self.budgets.check(spender)) is not None:
                log.info("memory consolidation of %s skipped: %s is spent", session_id, hit.name)
                return result
        known = await self.facts.list_facts(scope, limit=_KNOWN_SHOWN)
        request = self._request(known, transcript)
        try:
            async with asyncio.timeout(self.timeout):
                completion = await complete(self.provider, request)
        except Exception as exc:
            log.warning(
                "memory consolidation of %s failed: %s", session_id, self.redactor(str(exc))
            )
            return result
        result.usage = completion.usage
        await self._charge(session_id, completion.usage, user=user, chat=chat)
        answer = parse_answer(completion.text)
        if answer is None:
            log.warning("memory consolidation of %s: the answer was not the schema", session_id)
            return result
        result.answered = True
        await self._apply(answer, known, scope, session_id, result)
        log.info(
            "memory consolidation of %s: %d remembered, %d replaced, %d refused",
            session_id,
            len(result.remembered),
            len(result.replaced),
            len(result.refused),
        )
        return result

    def _request(self, known: Sequence[MemoryFact], transcript: str) -> ModelRequest:
        """The one call asking which facts `transcript` established, `known` shown."""
        return ModelRequest.model_construct(
            model=self.model,
            system=_SYSTEM,
            turn_context="",
            messages=[Message.user(_prompt(known, transcript))],
            tools=[],
            max_tokens=self.max_tokens,
            temperature=None,
        )

    async def _apply(
        self,
        answer: ConsolidationAnswer,
        known: Sequence[MemoryFact],
        scope: str,
        session_id: str,
        result: ConsolidationResult,
    ) -> None:
        """Replace the `known` facts the answer contradicts, then remember its new ones."""
        ids = {fact.id for fact in known}
        for replacement in answer.replace:
            if replacement.id not in ids:
                continue  # not one of the person's facts shown: nothing to replace
            kept = await self._keep(scope, session_id, replacement.text, result)
            if kept is not None and kept.id != replacement.id:
                await self.facts.forget_fact(scope, replacement.id)
                result.replaced.append(replacement.id)
        for text in answer.remember:
            await self._keep(scope, session_id, text, result)

    async def _keep(
        self, scope: str, session_id: str, text: str, result: ConsolidationResult
    ) -> MemoryFact | None:
        """Keep one fact; the fact remembered (stored now, or before), None if refused."""
        text = " ".join(text.split())[:MAX_FACT_CHARS]
        if not text:
            return None
        kept, fact = await keep_fact(
            self.facts,
            scope,
            text,
            redactor=self.redactor,
            now=self._clock(),
            source="consolidated",
            source_session=session_id,
        )
        if kept == "kept" and fact is not None:
            result.remembered.append(fact)
        elif kept == "duplicate":
            result.duplicates += 1
        else:
            # Never the text itself: a refused fact may be a credential.
            result.refused.append(kept)
        return fact

    async def _charge(
        self, session_id: str, usage: Usage, *, user: str | None, chat: str | None
    ) -> None:
        cost = self._cost(self.model, usage) if self._cost else None
        await self.ledger.record_cost(
            CostEntry(
                session_id=session_id,
                run_id=f"consolidate-{new_id()}",
                provider=self.provider.name,
                model=self.model,
                usage=usage,
                cost_usd=cost,
                at=self._clock(),
                user=user,
                chat=chat,
                id=new_id(),
            )
        )


def _prompt(known: Sequence[MemoryFact], transcript: str) -> str:
    remembered = "\n".join(f"- [{f.id}] {' '.join(f.text.split())}" for f in known) or "(none)"
    return f"Facts remembered so far:\n{remembered}\n\nThe conversation:\n{transcript}"


def _transcript(messages: Sequence[Message]) -> str:
    """The person's and the assistant's words (tool traffic left out), newest kept."""
    lines: list[str] = []
    for message in messages:
        if message.role not in ("user", "assistant") or not message.text.strip():
            continue
        text = " ".join(message.text.split())
        if len(text) > _MAX_MESSAGE_CHARS:
            text = text[: _MAX_MESSAGE_CHARS - 1] + "…"
        lines.append(f"{message.role.capitalize()}: {text}")
    transcript = "\n".join(lines)
    return transcript[-_MAX_TRANSCRIPT_CHARS:]


def latest_stretch(messages: Sequence[Message], quiet: timedelta) -> list[Message]:
    """The messages after the last pause of at least `quiet` between two of them (all of
    them when there is none): what was said since the previous quiet period."""
    start = 0
    for index in range(1, len(messages)):
        before, after = messages[index - 1].created_at, messages[index].created_at
        if before is not None and after is not None and after - before >= quiet:
            start = index
    return list(messages[start:])


class QuietStore(ConversationLog, ProcessedMarks, Protocol):
    """What the quiet-period pass reads and marks."""


class QuietConsolidation:
    """The quiet-period pass: a conversation with one person that has been quiet for `after`
    is consolidated once, on what was said since its previous quiet period.

    `tick_once` looks at the sessions updated between `after + lookback` and `after` ago,
    claims each quiet period with a processed mark (`consolidated:<session>:<last update>`,
    so with several workers exactly one makes the call, and a period is never done twice),
    and consolidates it when its person's messages have one author and it is no schedule's."""

    def __init__(
        self,
        *,
        store: QuietStore,
        consolidator: Consolidator,
        after: timedelta,
        lookback: timedelta = timedelta(days=1),
        scan: int = 200,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """Consolidate with `consolidator` the sessions of `store` quiet for `after` (those
        quiet for longer than `after + lookback` are left alone), of the `scan` most
        recently updated."""
        if after <= timedelta(0) or lookback <= timedelta(0) or scan < 1:
            raise ValueError("after, lookback and scan must be positive")
        self.store = store
        self.consolidator = consolidator
        self.after = after
        self.lookback = lookback
        self.scan = scan
        self._clock = clock

    async def tick_once(self) -> int:
        """One look at the sessions; how many quiet periods it consolidated."""
        now = self._clock()
        done = 0
        for session in await self.store.list_sessions(limit=self.scan):
            quiet_for = now - session.updated_at
            if quiet_for < self.after:
                continue
            if quiet_for > self.after + self.lookback:
                break  # most recently updated first: the rest are older still
            if session.key.startswith(_SCHEDULED_PREFIX) or session.message_count == 0:
                continue
            mark = f"consolidated:{session.id}:{session.updated_at.isoformat()}"
            if not await self.store.mark_processed(mark):
                continue  # this quiet period is another worker's, or done
            if await self._consolidate(session.id, session.message_count):
                done += 1
        return done

    async def _consolidate(self, session_id: str, count: int) -> bool:
        recent = await self.store.list_messages(
            session_id, after_seq=max(0, count - _QUIET_MESSAGES)
        )
        stretch = latest_stretch(recent, self.after)
        authors = {m.author for m in stretch if m.role == "user"}
        if len(authors) != 1 or None in authors:
            return False  # a group's conversation, or nobody's: no one person's facts
        (author,) = authors
        platform, _, user_id = (author or "").partition(":")
        if not platform or not user_id:
            return False
        try:
            await self.consolidator.consolidate(
                session_id, stretch, platform=platform, user_id=user_id
            )
        except Exception as exc:
            log.warning("memory consolidation of quiet %s failed: %s", session_id, exc)
            return False
        return True
