"""The worker runs the quiet-period memory pass (`Worker(quiet=...)`, `[memory]
consolidate_after`): a conversation quiet for long enough is consolidated while the worker runs,
with no message coming in."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.backends.sql.store import SqlStore, sqlite_url
from core.consolidation import Consolidator, QuietConsolidation
from core.embeddings import Embedding
from core.facts import MemoryFact
from core.messages import Message
from core.providers.scripted import ScriptedProvider, text_reply
from core.redact import Redactor
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from tests.backends.memory_bus import MemoryBus
from tests.workers import PATIENCE, build_worker

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class Remembered:
    """The store's facts, with an event set when one is remembered."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.kept = asyncio.Event()

    async def remember_fact(self, fact: MemoryFact, *, embedding: Embedding | None = None) -> None:
        await self.store.remember_fact(fact, embedding=embedding)
        self.kept.set()

    async def fact_embeddings(self, scope: str, model: str) -> list[tuple[MemoryFact, Embedding]]:
        return await self.store.fact_embeddings(scope, model)

    async def search_facts(self, scope: str, query: str, *, limit: int = 5) -> list[MemoryFact]:
        return await self.store.search_facts(scope, query, limit=limit)

    async def list_facts(self, scope: str, *, limit: int = 50) -> list[MemoryFact]:
        return await self.store.list_facts(scope, limit=limit)

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        return await self.store.forget_fact(scope, fact_id)


async def test_a_running_worker_consolidates_a_quiet_conversation(tmp_path: Path) -> None:
    store = await SqlStore.open(sqlite_url(tmp_path / "records.db"), clock=lambda: NOW)
    try:
        session = await store.current_session("telegram:bot:42")
        said = Message.user("I am allergic to peanuts").model_copy(update={"author": "telegram:42"})
        await store.append_message(session.id, said)
        provider = ScriptedProvider(
            [text_reply(json.dumps({"remember": ["Is allergic to peanuts"], "replace": []}))]
        )
        facts = Remembered(store)
        consolidator = Consolidator(
            profile="default",
            provider=provider,
            model="test-model",
            facts=facts,
            ledger=store,
            redactor=Redactor(),
            clock=lambda: NOW,
        )
        quiet = QuietConsolidation(
            store=store,
            consolidator=consolidator,
            after=timedelta(minutes=30),
            clock=lambda: NOW + timedelta(hours=1),
        )
        runtime = AgentRuntime(
            provider=ScriptedProvider([]), model="test-model", tools=ToolRegistry([]), store=store
        )
        worker = build_worker(bus=MemoryBus(), store=store, runtime=runtime, quiet=quiet)
        running = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(facts.kept.wait(), PATIENCE)
        finally:
            await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
            await running

        (fact,) = await store.list_facts("default:telegram:42")
        assert (fact.text, fact.source, fact.source_session) == (
            "Is allergic to peanuts",
            "consolidated",
            session.id,
        )
        assert len(provider.requests) == 1
    finally:
        await store.close()
