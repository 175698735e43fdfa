"""Access rules inside turns, through the `Worker` on the real `MemoryBus` and SQLite store:
in a group, tools that act beyond the chat run only for approved people; privileged tools are
refused to non-admins with the reason, without asking them to confirm."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from limits.aio.storage import MemoryStorage
from pydantic import BaseModel

from core.access import NOT_ADMIN, NOT_APPROVED, Pairing
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound, Outbound
from core.messages import Message, ToolCall
from core.policy import ChannelPolicy, PlatformAccess
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply, tool_reply
from core.ratelimit import RateLimits, RateLimitSettings
from core.runtime import AgentRuntime
from core.store.access import PairingRequest
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry
from tests.backends.memory_bus import MemoryBus
from tests.workers import Outbox, build_worker, hand_in

PATIENCE = 5.0
GROUP = Address(platform="telegram", bot="b", chat="g1")


class NoArgs(BaseModel):
    pass


def tools(ran: list[str]) -> ToolRegistry:
    def tool(name: str, tier: SafetyTier) -> Tool[Any]:
        async def run(_args: NoArgs, context: ToolContext) -> str:
            ran.append(f"{name} by {context.user_id}")
            return f"{name} done"

        return Tool(name=name, description=name, args=NoArgs, tier=tier, run=run)

    return ToolRegistry(
        [tool("note", SafetyTier.SIDE_EFFECTING), tool("wipe", SafetyTier.PRIVILEGED)]
    )


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def approve(store: SqlStore, user: str) -> None:
    pairing = Pairing(store, codes=lambda: "ABCDEFGH")
    await pairing.request(Inbound(address=GROUP, user_id=user, is_direct=True))
    assert await pairing.approve("telegram", "ABCDEFGH")


async def group_turn(
    bus: MemoryBus, store: SqlStore, user: str, calls: list[str]
) -> tuple[ScriptedProvider, list[str], list[Message], list[Outbound]]:
    """One turn of `user` in the group (telegram chats in `full`) calling `calls` in order."""
    ran: list[str] = []
    provider = ScriptedProvider(
        [
            *(
                tool_reply(ToolCall(id=f"c{n}", name=name, arguments={}))
                for n, name in enumerate(calls)
            ),
            text_reply("Finished."),
        ]
    )
    runtime = AgentRuntime(provider=provider, model="m", tools=tools(ran), store=store)
    policy = ChannelPolicy(modes={"telegram": "full"}, default_access=PlatformAccess())
    worker = build_worker(bus=bus, store=store, runtime=runtime, policy=policy)
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")
    try:
        await hand_in(worker, Inbound(address=GROUP, user_id=user, text="do it", mentions_bot=True))
        await outbox.until(kind="reply")
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
    session = await store.current_session(GROUP.session_key)
    results = [m for m in await store.list_messages(session.id) if m.role == "tool"]
    return provider, ran, results, outbox.seen


async def test_an_unapproved_person_in_a_group_cannot_use_tools_that_change_things(
    bus: MemoryBus, store: SqlStore
) -> None:
    provider, ran, [result], _ = await group_turn(bus, store, "u2", ["note"])

    assert ran == []
    assert result.text == f"Tool 'note' was not run: {NOT_APPROVED}"
    # Neither tool was offered, and the model was told why.
    assert provider.requests[0].tools == []
    assert NOT_APPROVED in provider.requests[0].system


async def test_an_approved_person_uses_them_but_privileged_ones_are_refused_unasked(
    bus: MemoryBus, store: SqlStore
) -> None:
    await approve(store, "u1")

    provider, ran, results, seen = await group_turn(bus, store, "u1", ["note", "wipe"])

    assert ran == ["note by u1"]
    assert [m.text for m in results] == ["note done", f"Tool 'wipe' was not run: {NOT_ADMIN}"]
    assert [t.name for t in provider.requests[0].tools] == ["note"]
    # Nobody was asked to confirm.
    assert not [o for o in seen if o.kind == "question"]


def test_requests_need_a_valid_code() -> None:
    with pytest.raises(ValueError, match="code"):
        PairingRequest.model_validate(
            {
                "platform": "telegram",
                "user_id": "u",
                "code": "OOOO0000",
                "created_at": "2026-03-01T12:00:00Z",
                "expires_at": "2026-03-01T13:00:00Z",
            }
        )


async def test_a_person_approved_as_admin_is_not_rate_limited(
    bus: MemoryBus, store: SqlStore
) -> None:
    pairing = Pairing(store, codes=lambda: "ABCDEFGH")
    await pairing.request(Inbound(address=GROUP, user_id="boss", is_direct=True))
    assert await pairing.approve("telegram", "ABCDEFGH", admin=True)
    provider = ScriptedProvider([text_reply(f"answer {n}") for n in range(3)])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    limits = RateLimits(
        RateLimitSettings(rate_limit="1/minute", chat_rate_limit="", daily_turns=0),
        MemoryStorage(),
    )
    policy = ChannelPolicy(default_access=PlatformAccess())
    worker = build_worker(bus=bus, store=store, runtime=runtime, policy=policy, rate_limits=limits)
    task = asyncio.create_task(worker.run())
    outbox = Outbox(bus, "telegram")

    def replies() -> list[str]:
        return [o.text for o in outbox.seen if o.kind in ("reply", "notice")]

    try:
        for n in range(3):  # three messages against a limit of one a minute
            await hand_in(
                worker,
                Inbound(address=GROUP, user_id="boss", text=f"q{n}", mentions_bot=True),
            )
        while len(replies()) < 3:
            assert await outbox.next() is not None, f"only {replies()}"
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    assert replies() == ["answer 0", "answer 1", "answer 2"]


async def test_a_strangers_messages_make_no_session(bus: MemoryBus, store: SqlStore) -> None:
    provider = ScriptedProvider([text_reply("never sent")])
    runtime = AgentRuntime(provider=provider, model="m", tools=ToolRegistry([]), store=store)
    worker = build_worker(
        bus=bus, store=store, runtime=runtime, policy=ChannelPolicy(default_access=PlatformAccess())
    )
    task = asyncio.create_task(worker.run())
    said = Inbound(address=GROUP, user_id="u9", text="hello?", is_direct=True)
    outbox = Outbox(bus, "telegram")
    try:
        await hand_in(worker, said)
        assert await outbox.next() is not None
        await worker.idle.wait()
        await outbox.rest()
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)

    # Asked to pair, not answered; the session lookup made along the way created nothing.
    assert [(n.kind, n.reply_to) for n in outbox.seen] == [("notice", said.id)]
    assert provider.requests == []
    assert await store.list_sessions() == []
    assert await store.is_processed(said.dedupe_key)
