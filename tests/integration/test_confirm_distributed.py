"""The confirmation's answer reaches the turn waiting for it on another worker (real Redis).

Two workers share a real `redis-server` (bus, mailboxes) and PostgreSQL (records). Worker A
takes the turn, which asks; worker B starts then. The answer, handed in as a gateway does
(`accept_inbound`), goes on the `control` topic, which both workers hear; A's gate takes it and
the tool runs (or not). A typed "yes" also waits in the session's mailbox (A holds the session),
marked processed by A's gate, so it never becomes a turn of its own; someone else's "yes" is no
answer, so the question times out (a refusal) and that "yes" is then answered as an ordinary
message.
The last test goes the whole way: a press on the Telegram fake, through the real gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pydantic import SecretStr

from channels.gateway import Gateway
from channels.telegram.adapter import TelegramAdapter, TelegramSettings
from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql.store import SqlStore
from core.bus import EVENTS, outbound_queue
from core.bus.base import Subscription
from core.confirm import Confirmations, answer_inbound, button_value
from core.envelopes import Address, EventEnvelope, Inbound, Outbound
from core.mailbox.intake import accept_inbound
from core.policy import ChannelPolicy
from core.providers import ScriptedProvider
from core.providers.scripted import text_reply
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.tools import ToolRegistry
from core.worker import Worker
from tests.confirming import script, wipe_tool
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.serving import COMMANDS, local_replies
from tests.integration.telegram_helpers import reply_containing, until
from tests.workers import build_worker

PATIENCE = 10.0
KEYS = RedisKeys("confirm")
CHAT = Address(platform="telegram", bot="b", chat="42")
ASKER = "7"


@dataclass
class Deployment:
    store: SqlStore
    gateway_bus: RedisBus
    gateway_mailboxes: RedisMailboxes
    ran: list[str] = field(default_factory=list)
    providers: dict[str, ScriptedProvider] = field(default_factory=dict)
    workers: dict[str, Worker] = field(default_factory=dict)


async def hand_in(deployment: Deployment, inbound: Inbound) -> None:
    """Hand `inbound` in as a gateway does."""
    await accept_inbound(
        inbound, mailboxes=deployment.gateway_mailboxes, bus=deployment.gateway_bus
    )


async def _hand_in_first(deployment: Deployment) -> None:
    await hand_in(deployment, said("wipe it"))


@asynccontextmanager
async def deployment(
    redis_url: str,
    database_url: str,
    *,
    wait: float = PATIENCE,
    first: Callable[[Deployment], Awaitable[None]] = _hand_in_first,
) -> AsyncIterator[Deployment]:
    """Workers A and B on Redis and `database_url`, questions waiting `wait` s.
    `first(deployment)` sends the turn's message while A alone runs; this yields once A's turn
    has asked."""
    async with AsyncExitStack() as stack:
        raw = aioredis.Redis.from_url(redis_url)
        stack.push_async_callback(raw.aclose)
        store = await SqlStore.open(database_url)
        stack.push_async_callback(store.close)
        gateway_bus = await RedisBus.connect(redis_url, keys=KEYS)
        stack.push_async_callback(gateway_bus.close)
        found = Deployment(store, gateway_bus, RedisMailboxes(raw, keys=KEYS))
        tasks: list[asyncio.Task[None]] = []
        events = await gateway_bus.subscribe(EVENTS)
        stack.push_async_callback(events.aclose)
        for name in ("a", "b"):
            bus = await RedisBus.connect(redis_url, keys=KEYS)
            stack.push_async_callback(bus.close)
            gate = Confirmations(bus=bus, timeout=wait, marks=store)
            # A third answer, for a "yes" that turns out to be an ordinary message.
            provider = ScriptedProvider([*script(), text_reply("Yes to what?")])
            found.providers[name] = provider
            runtime = AgentRuntime(
                provider=provider,
                model="test-model",
                tools=ToolRegistry([wipe_tool(found.ran)]),
                store=store,
                confirm=gate.confirm,
            )
            worker = found.workers[name] = build_worker(
                bus=bus,
                store=store,
                runtime=runtime,
                confirmations=gate,
                policy=ChannelPolicy(
                    modes={"telegram": "full"}, admins=frozenset({f"telegram:{ASKER}"})
                ),
                mailboxes=RedisMailboxes(raw, keys=KEYS, lease_seconds=30),
                name=f"worker-{name}",
                sweep_interval=0.2,
            )
            tasks.append(asyncio.create_task(worker.run()))
            if name == "a":
                # A alone is listening when the turn's message comes: it takes it and asks.
                await first(found)
                await lifecycle_event(events, "confirm.request")
        try:
            yield found
        finally:
            for worker, task in zip(found.workers.values(), tasks, strict=True):
                await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
                await asyncio.wait_for(task, PATIENCE)


def said(text: str, user_id: str = ASKER) -> Inbound:
    return Inbound(address=CHAT, user_id=user_id, user_name="Ann", text=text, is_direct=True)


def pressed(allowed: bool) -> Callable[[str], Inbound]:
    """The asker's press of a button of the question whose id is given."""

    def press(question_id: str) -> Inbound:
        found = answer_inbound(
            button_value(question_id, allowed),
            address=CHAT,
            user_id=ASKER,
            user_name="Ann",
            press_id="cb-1",
        )
        assert found is not None
        return found

    return press


async def outbound_until(bus: RedisBus, kind: str, text: str = "") -> Outbound:
    async with asyncio.timeout(PATIENCE):
        while True:
            delivery = await bus.receive(outbound_queue("telegram"), consumer="gw", timeout=1)
            if delivery is None:
                continue
            await delivery.ack()
            envelope = delivery.envelope
            assert isinstance(envelope, Outbound)
            if envelope.kind == kind and text in envelope.text:
                return envelope


async def lifecycle_event(events: Subscription, name: str) -> EventEnvelope:
    """The next event called `name` on a subscription to `events`."""
    async with asyncio.timeout(PATIENCE):
        async for event in events:
            if isinstance(event, EventEnvelope) and event.name == name:
                return event
    raise AssertionError(f"the events topic ended before {name}")


async def answered(
    deployment: Deployment, answer: Callable[[str], Inbound]
) -> tuple[Outbound, EventEnvelope]:
    """Wait for the question, send `answer(question id)` as a gateway would; the decision
    shown and its lifecycle event, once the turn has finished."""
    events = await deployment.gateway_bus.subscribe(EVENTS)
    question = await outbound_until(deployment.gateway_bus, "question")
    assert question.question is not None
    await hand_in(deployment, answer(question.question))
    decision = await outbound_until(deployment.gateway_bus, "decision")
    assert decision.question == question.question
    await outbound_until(deployment.gateway_bus, "reply", "Finished.")
    event = await lifecycle_event(events, "confirm.decision")
    await events.aclose()
    return decision, event


async def users_said(deployment: Deployment) -> list[str]:
    session = await deployment.store.current_session(CHAT.session_key)
    return [m.text for m in await deployment.store.list_messages(session.id) if m.role == "user"]


async def idle(deployment: Deployment) -> None:
    for worker in deployment.workers.values():
        await asyncio.wait_for(worker.idle.wait(), PATIENCE)


async def test_a_typed_yes_taken_by_the_other_worker_lets_the_tool_run(
    redis_url: str, postgres_url: str
) -> None:
    async with deployment(redis_url, postgres_url) as found:
        decision, event = await answered(found, lambda _: said("yes"))
        await idle(found)

        assert found.ran == ["/tmp/x"]
        assert decision.text.endswith("Allowed by Ann.")
        assert (event.data["allowed"], event.data["via"]) == (True, "text")
        assert len(found.providers["a"].requests) == 2
        assert found.providers["b"].requests == []  # the yes never became a turn
        assert await users_said(found) == ["wipe it"]


async def test_a_button_press_taken_by_the_other_worker_lets_the_tool_run(
    redis_url: str,
    postgres_url: str,
) -> None:
    async with deployment(redis_url, postgres_url) as found:
        _, event = await answered(found, pressed(True))
        await idle(found)

        assert found.ran == ["/tmp/x"]
        assert (event.data["allowed"], event.data["via"]) == (True, "button")
        assert found.providers["b"].requests == []


async def test_someone_elses_yes_is_no_answer_so_the_question_times_out(
    redis_url: str, postgres_url: str
) -> None:
    async with deployment(redis_url, postgres_url, wait=0.3) as found:
        decision, event = await answered(found, lambda _: said("yes", user_id="8"))
        # The other person's yes is an ordinary message, answered after the turn.
        await outbound_until(found.gateway_bus, "reply", "Yes to what?")
        await idle(found)

        assert found.ran == []
        assert decision.text.endswith("No answer within 0.3 s: refused.")
        assert (event.data["allowed"], event.data["reason"]) == (False, "timeout")
        assert await users_said(found) == ["wipe it", "yes"]


async def test_a_press_on_telegram_reaches_the_worker_holding_the_turn(
    redis_url: str, postgres_url: str, fake_telegram: FakeTelegram
) -> None:
    """The whole way: python-telegram-bot polls the fake, the gateway publishes the press on
    Redis, worker A's turn gets it; the gateway shows the decision."""
    adapter = TelegramAdapter(
        TelegramSettings(token=SecretStr(fake_telegram.token), api_url=fake_telegram.url),
        menu=COMMANDS.menu(),
        replies=local_replies(),
    )
    dm = int(CHAT.chat)

    async def from_telegram(deployment: Deployment) -> None:
        gateway = Gateway(
            adapter,
            deployment.gateway_bus,
            mailboxes=deployment.gateway_mailboxes,
            readiness=Readiness(),
        )
        running = asyncio.create_task(gateway.run())
        stopping.append((gateway, running))
        await fake_telegram.wait_idle_poll(timeout=PATIENCE)
        fake_telegram.private_text(dm, "wipe it", user_id=int(ASKER))

    stopping: list[tuple[Gateway, asyncio.Task[None]]] = []
    async with deployment(redis_url, postgres_url, first=from_telegram) as found:
        try:
            question = await reply_containing(fake_telegram, dm, "I'd like to run")
            markup: Any = question.reply_markup
            allow = markup["inline_keyboard"][0][0]["callback_data"]

            fake_telegram.press_button(dm, question.message_id, allow, user_id=int(ASKER))

            await reply_containing(fake_telegram, dm, "Finished.")
            await until(fake_telegram, lambda: "Allowed by" in question.text, "the decision")
            await idle(found)
        finally:
            # Before the deployment closes the bus the gateway uses.
            for gateway, running in stopping:
                await gateway.stop()
                await asyncio.wait_for(running, PATIENCE)
    assert found.ran == ["/tmp/x"]
    assert question.reply_markup is None
    assert found.providers["b"].requests == []  # B only passed the press on
