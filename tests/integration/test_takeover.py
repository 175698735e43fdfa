"""A chat taken over, in both deployments: the embedded one (SQLite records, SQLite queues) and
the distributed one (PostgreSQL records, Redis mailboxes and bus).

While taken over, a person's message is stored and marked processed, with no model call and
nothing sent; the operator's words are stored as theirs; after the handback the model reads
the whole history, the note included, and answers. A takeover past its time is ended by a
worker's sweep, with its note and a notice to the admin's DM.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bots.platforms import command_registry
from core.backends import Backends
from core.backends.redis import open_distributed
from core.backends.redis.keys import RedisKeys
from core.backends.sql import open_embedded
from core.backends.sql.store import sqlite_url
from core.clock import utc_now
from core.envelopes import Address, Inbound, Outbound
from core.events import Finished, ModelEvent, TextDelta
from core.mailbox.intake import accept_inbound
from core.policy import ChannelPolicy
from core.providers.base import ModelRequest
from core.runtime import AgentRuntime
from core.store.base import Store
from core.takeover import Takeovers
from core.tools import ToolRegistry
from tests.e2e.processes import until
from tests.workers import Outbox, build_worker

PATIENCE = 10.0
CHAT = Address(platform="telegram", bot="777", chat="42")
TYPED = Address(platform="telegram", chat="42")  # as the operator names it
ADMIN_DM = Address(platform="telegram", chat="9000")


class CountingProvider:
    """Answers `Answer <n>` and keeps every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "counting"

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        yield TextDelta(text=f"Answer {len(self.requests)}")
        yield Finished(stop_reason="end_turn")


class Clock:
    """The takeovers' time, moved on by the test (from now: the store's clock is the real one)."""

    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["embedded", "distributed"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """The deployment's name, its store's URL and (distributed) its Redis URL."""
    if request.param == "embedded":
        return "embedded", sqlite_url(tmp_path / "switchboard.db"), ""
    return (
        "distributed",
        request.getfixturevalue("postgres_url"),
        request.getfixturevalue("redis_url"),
    )


@asynccontextmanager
async def opened(deployment: tuple[str, str, str], tmp_path: Path) -> AsyncIterator[Backends]:
    name, store_url, redis_url = deployment
    if name == "embedded":
        async with open_embedded(
            store_url, tmp_path / "queues.db", lease_seconds=30, take_over=True
        ) as found:
            yield found
    else:
        async with open_distributed(
            store_url,
            redis_url,
            RedisKeys("takeover"),
            bus_lease_seconds=30,
            turn_lease_seconds=30,
        ) as found:
            yield found


def said(text: str, number: int) -> Inbound:
    return Inbound(
        address=CHAT,
        user_id="7",
        user_name="Ann",
        text=text,
        is_direct=True,
        platform_message_id=str(number),
    )


async def processed(store: Store, inbound: Inbound) -> None:
    """Wait until the worker marked `inbound` processed (nothing is sent to wait for)."""
    await until(lambda: store.is_processed(inbound.dedupe_key), PATIENCE, f"{inbound.text!r} kept")


async def test_a_taken_over_chat_is_stored_not_answered_until_handed_back(
    deployment: tuple[str, str, str], tmp_path: Path
) -> None:
    provider = CountingProvider()
    clock = Clock()
    async with opened(deployment, tmp_path) as found:
        store, bus = found.store, found.bus
        takeovers = Takeovers(store, bus=bus, admin_dms=[ADMIN_DM], clock=clock)
        runtime = AgentRuntime(
            provider=provider, model="test-model", tools=ToolRegistry([]), store=store
        )
        worker = build_worker(
            bus=bus,
            store=store,
            runtime=runtime,
            mailboxes=found.mailboxes,
            sweep_interval=0.05,
            takeovers=takeovers,
        )
        running = asyncio.create_task(worker.run())
        outbox = Outbox(bus, "telegram")
        try:
            await takeovers.take_over(TYPED, by="cli", duration=timedelta(hours=1))
            first = said("is anyone there?", 1)
            await accept_inbound(first, mailboxes=found.mailboxes, bus=bus)
            await processed(store, first)
            assert provider.requests == []
            # Kept as the person's own words (`switchboard people` finds them by their writer).
            session = await store.current_session(first.session_key)
            (kept_message,) = await store.list_messages(session.id)
            assert kept_message.author == "telegram:7"
            assert await outbox.is_empty()
            kept = await takeovers.operator_said(TYPED, "Yes, Bob from support here.")
            assert kept is not None

            assert await takeovers.hand_back(TYPED) is not None
            second = said("thanks, and the bot?", 2)
            await accept_inbound(second, mailboxes=found.mailboxes, bus=bus)
            answer = await outbox.until("Answer 1", kind="reply")
            assert answer.address.chat == "42"
            history = [(m.role, m.text) for m in provider.requests[0].messages]
            assert history[0] == ("user", "is anyone there?")
            assert history[1] == ("assistant", "Yes, Bob from support here.")
            assert history[2][0] == "assistant"
            assert "a person from the team answered in this chat" in history[2][1]
            assert history[3] == ("user", "thanks, and the bot?")

            # Taken over again; past its time, the worker's sweep ends it and tells the admin.
            await takeovers.take_over(TYPED, by="cli", duration=timedelta(hours=1))
            third = said("hello again", 3)
            await accept_inbound(third, mailboxes=found.mailboxes, bus=bus)
            await processed(store, third)
            assert len(provider.requests) == 1
            clock.now += timedelta(hours=2)
            notice = await outbox.until("ran out", kind="notification")
            assert notice.address == ADMIN_DM
            assert await takeovers.running() == []
            fourth = said("still there?", 4)
            await accept_inbound(fourth, mailboxes=found.mailboxes, bus=bus)
            await outbox.until("Answer 2", kind="reply")
        finally:
            await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(running, PATIENCE)
    replies = [o for o in outbox.seen if isinstance(o, Outbound) and o.kind == "reply"]
    assert [o.text for o in replies] == ["Answer 1", "Answer 2"]


def command(text: str, *, chat: str, user: str, direct: bool = True) -> Inbound:
    word = text.split()[0].lstrip("/")
    return Inbound(
        kind="command",
        command=word,
        address=Address(platform="telegram", bot="777", chat=chat),
        user_id=user,
        text=text,
        is_direct=direct,
    )


async def test_an_admin_takes_over_and_hands_back_from_their_own_dm(
    deployment: tuple[str, str, str], tmp_path: Path
) -> None:
    provider = CountingProvider()
    async with opened(deployment, tmp_path) as found:
        store, bus = found.store, found.bus
        runtime = AgentRuntime(
            provider=provider, model="test-model", tools=ToolRegistry([]), store=store
        )
        worker = build_worker(
            bus=bus,
            store=store,
            runtime=runtime,
            mailboxes=found.mailboxes,
            policy=ChannelPolicy(admins=frozenset({"telegram:1"})),
            commands=command_registry(),
        )
        running = asyncio.create_task(worker.run())
        outbox = Outbox(bus, "telegram")
        try:
            for refused, wanted in (
                (command("/takeover telegram:42", chat="-5", user="1", direct=False), "direct"),
                (command("/takeover telegram:42", chat="2", user="2"), "Only an admin"),
                (command("/takeover telegram:42 soon", chat="1", user="1"), "not a duration"),
            ):
                await accept_inbound(refused, mailboxes=found.mailboxes, bus=bus)
                await outbox.until(wanted, kind="notice")
            assert await Takeovers(store).running() == []

            took = command("/takeover telegram:42 30m", chat="1", user="1")
            await accept_inbound(took, mailboxes=found.mailboxes, bus=bus)
            await outbox.until("You have telegram:42 until", kind="notice")
            [running_now] = await Takeovers(store).running()
            assert running_now.by == "telegram:1"
            kept = said("hello?", 1)
            await accept_inbound(kept, mailboxes=found.mailboxes, bus=bus)
            await processed(store, kept)
            assert provider.requests == []

            back = command("/handback telegram:42", chat="1", user="1")
            await accept_inbound(back, mailboxes=found.mailboxes, bus=bus)
            await outbox.until("I answer in telegram:42 again", kind="notice")
            await accept_inbound(said("and now?", 2), mailboxes=found.mailboxes, bus=bus)
            await outbox.until("Answer 1", kind="reply")
        finally:
            await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
            await asyncio.wait_for(running, PATIENCE)
