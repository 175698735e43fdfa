"""Schedules end to end in one process: `Scheduler` → bus → `Worker` → `outbound.<platform>`.

The real `SqlStore`, `MemoryBus`, `Worker`, `AgentRuntime`, schedule tools and either the
`ScriptedProvider` or the offline `DemoProvider`. No channel runs: the test reads
`outbound.telegram` itself. The clock is moved by hand and the test ticks the scheduler, so no
wait depends on time passing; each wait is for a run's outcome or a delivery.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from channels import telegram
from core.backends.sql.store import SqlStore, sqlite_url
from core.bus import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.errors import ProviderError
from core.events import ModelEvent
from core.messages import ToolCall
from core.model_choice import ModelChoices, ModelOption
from core.modes import FULL, SAFE_CHAT, SAFE_CHAT_TOOLS, CapabilityMode
from core.policy import ChannelPolicy
from core.providers import DemoProvider, ModelRequest, Provider, ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.scheduling.book import Notification, ScheduleBook
from core.scheduling.models import IntervalCadence, NotifyPolicy, OnceCadence, Schedule
from core.scheduling.scheduler import Scheduler
from core.scheduling.tools import schedule_tools
from core.tools import SafetyTier, Tool, ToolContext, ToolRegistry, builtin_tools
from core.worker import Worker
from tests.backends.memory_bus import MemoryBus
from tests.workers import build_worker, hand_in

# How long a wait lasts before the test fails instead of hanging; only reached when broken.
PATIENCE = 5.0
T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
CHAT = Address.parse("telegram:4242")
# A chat as the Telegram gateway addresses it: the bot's key, the chat id.
DM = Address(platform="telegram", bot="123456789", chat="555")


class HandClock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


class WatchedBook(ScheduleBook):
    """A `ScheduleBook` that tells the test each time a run's outcome has been recorded."""

    def __init__(self, store: SqlStore, clock: HandClock) -> None:
        super().__init__(store, clock=clock)
        self.finished: asyncio.Queue[tuple[str, list[Notification]]] = asyncio.Queue()

    async def finish(self, schedule_id: str, run_id: str, **outcome: Any) -> list[Notification]:
        notes = await super().finish(schedule_id, run_id, **outcome)
        self.finished.put_nowait((run_id, notes))
        return notes


class OpenFileArgs(BaseModel):
    """A file to read."""

    path: str


async def _open_file(args: OpenFileArgs, _context: ToolContext) -> str:
    return f"contents of {args.path}"


# A tool outside `safe-chat`: offered only under `full`.
OPEN_FILE = Tool(
    name="open_file",
    description="Read a file of the operator's machine.",
    args=OpenFileArgs,
    tier=SafetyTier.SIDE_EFFECTING,
    run=_open_file,
)


@dataclass
class Stack:
    """One running worker with a scheduler beside it, and what the test looks at."""

    clock: HandClock
    store: SqlStore
    bus: MemoryBus
    book: WatchedBook
    scheduler: Scheduler
    worker: Worker

    async def schedule(
        self,
        *,
        prompt: str = "Is it raining?",
        notify: NotifyPolicy = "always",
        owner: str = "cli",
        deliver_to: Address = CHAT,
    ) -> Schedule:
        """A schedule every minute, from the clock's current time."""
        return await self.book.create(
            cadence=IntervalCadence(seconds=60, start=self.clock()),
            prompt=prompt,
            deliver_to=deliver_to,
            owner=owner,
            notify=notify,
        )

    async def fire(self, schedule: Schedule) -> tuple[str, list[Notification]]:
        """Move the clock to the schedule's next run, tick, and wait for the run's outcome."""
        current = await self.store.get_schedule(schedule.id)
        assert current is not None and current.next_run_at is not None
        self.clock.now = current.next_run_at
        assert await self.scheduler.tick_once() == 1
        return await asyncio.wait_for(self.book.finished.get(), PATIENCE)

    async def delivered(self) -> Outbound:
        """The next delivery on `outbound.telegram`."""
        delivery = await self.bus.receive(
            outbound_queue("telegram"), consumer="test", timeout=PATIENCE
        )
        assert delivery is not None, "nothing arrived on outbound.telegram"
        await delivery.ack()
        assert isinstance(delivery.envelope, Outbound)
        return delivery.envelope

    async def nothing_delivered(self) -> bool:
        queue = outbound_queue("telegram")
        return await self.bus.receive(queue, consumer="test", timeout=0) is None

    async def current(self, schedule: Schedule) -> Schedule:
        found = await self.store.get_schedule(schedule.id)
        assert found is not None
        return found


@asynccontextmanager
async def running(
    tmp_path: Path,
    provider: Provider,
    *,
    policy: ChannelPolicy | None = None,
    models: ModelChoices | None = None,
) -> AsyncIterator[Stack]:
    """A worker answering with `provider`, the schedule tools registered, until the block ends."""
    clock = HandClock()
    store = await SqlStore.open(sqlite_url(tmp_path / "db.sqlite"), clock=clock)
    bus = MemoryBus()
    book = WatchedBook(store, clock)
    runtime = AgentRuntime(
        provider=provider,
        model="test-model",
        tools=ToolRegistry([*builtin_tools(), *schedule_tools(book), OPEN_FILE]),
        store=store,
        clock=clock,
        models=models,
    )
    worker = build_worker(
        bus=bus,
        store=store,
        runtime=runtime,
        policy=policy,
        prompt_hints={"telegram": telegram.PROMPT_HINT},
        book=book,
    )
    task = asyncio.create_task(worker.run(), name="test-worker")
    try:
        yield Stack(
            clock,
            store,
            bus,
            book,
            Scheduler(
                store=store,
                book=book,
                bus=bus,
                mailboxes=worker.mailboxes,
                readiness=Readiness(),
                clock=clock,
            ),
            worker,
        )
    finally:
        await asyncio.wait_for(worker.stop(grace=PATIENCE), PATIENCE)
        await asyncio.wait_for(task, PATIENCE)
        await bus.close()
        await store.close()
        await provider.aclose()


SCHEDULE_TOOLS = (
    "schedule_create",
    "schedule_list",
    "schedule_cancel",
    "schedule_runs",
    "schedule_run_output",
)


def offered(request: ModelRequest) -> set[str]:
    return {tool.name for tool in request.tools}


# --- delivery -------------------------------------------------------------------------------


async def test_a_fired_schedule_answer_arrives_as_a_notification_to_its_chat(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([text_reply("No rain today."), text_reply("Rain at noon.")])
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule()

        run_id, notes = await stack.fire(made)
        first = await stack.delivered()

        assert (first.kind, first.address, first.text) == ("notification", CHAT, "No rain today.")
        assert first.reply_to is None
        assert notes == [Notification(CHAT, "No rain today.")]
        (run,) = await stack.store.list_runs(made.id)
        assert (run.id, run.status, run.output, run.delivery) == (
            run_id,
            "succeeded",
            "No rain today.",
            "pending",  # no gateway runs here to send back a receipt
        )
        assert run.duration_ms is not None

        # The next run goes on in the same session: it sees what the schedule said before.
        await stack.fire(made)
        second = await stack.delivered()
        assert (second.kind, second.address, second.text) == ("notification", CHAT, "Rain at noon.")
        assert await stack.nothing_delivered()

        session = await stack.store.current_session(f"scheduled:{made.id}")
        stored = [m.text for m in await stack.store.list_messages(session.id)]
        assert stored == ["Is it raining?", "No rain today.", "Is it raining?", "Rain at noon."]

    texts = [[m.text for m in r.messages] for r in provider.requests]
    assert texts == [
        ["Is it raining?"],
        ["Is it raining?", "No rain today.", "Is it raining?"],
    ]


async def test_a_scheduled_run_uses_the_model_its_chat_chose(tmp_path: Path) -> None:
    provider = ScriptedProvider([text_reply("No rain today."), text_reply("Rain at noon.")])
    choices = ModelChoices(
        default_provider=provider,
        default_model="test-model",
        allowed=(ModelOption(provider="scripted", model="chosen-model"),),
        providers={"scripted": provider},
    )
    async with running(tmp_path, provider, models=choices) as stack:
        made = await stack.schedule()
        await stack.fire(made)  # the chat has no session yet: the default
        chat = await stack.store.current_session(CHAT.session_key)
        assert await stack.store.set_session_model(chat.id, "chosen-model")
        await stack.fire(made)

    assert [r.model for r in provider.requests] == ["test-model", "chosen-model"]


async def test_conditional_stays_quiet_without_the_marker_and_strips_it_when_present(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [text_reply("All clear, nothing to report."), text_reply("[NOTIFY] Rain at noon.")]
    )
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(notify="conditional")

        _, quiet = await stack.fire(made)
        _, loud = await stack.fire(made)

        assert quiet == []
        assert loud == [Notification(CHAT, "Rain at noon.")]
        # The first thing on the queue is the second run's: the first run sent nothing.
        notification = await stack.delivered()
        assert (notification.kind, notification.text) == ("notification", "Rain at noon.")
        assert await stack.nothing_delivered()
        runs = await stack.store.list_runs(made.id)
        assert [(r.status, r.delivery) for r in runs] == [
            ("succeeded", "pending"),
            ("succeeded", "none"),
        ]
        assert runs[1].output == "All clear, nothing to report."


async def test_never_records_the_answer_and_delivers_nothing(tmp_path: Path) -> None:
    provider = ScriptedProvider([text_reply("[NOTIFY] Rain at noon."), text_reply("Sunny.")])
    async with running(tmp_path, provider) as stack:
        quiet = await stack.schedule(notify="never")
        stack.clock.advance(timedelta(seconds=30))  # due after `quiet`, not with it
        loud = await stack.schedule(notify="always")

        await stack.fire(quiet)
        await stack.fire(loud)

        assert (await stack.delivered()).text == "Sunny."
        assert await stack.nothing_delivered()
        (run,) = await stack.store.list_runs(quiet.id)
        assert (run.output, run.delivered) == ("[NOTIFY] Rain at noon.", False)


# --- failures -------------------------------------------------------------------------------


async def test_repeated_failures_tell_the_chat_at_three_and_disable_at_five(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [ProviderError("auth", "invalid x-api-key", provider="anthropic") for _ in range(5)]
    )
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(notify="never")

        outcomes = [await stack.fire(made) for _ in range(3)]
        notice = await stack.delivered()
        assert [len(notes) for _, notes in outcomes] == [0, 0, 1]
        assert notice.kind == "notification"
        assert notice.address == CHAT
        assert f"Scheduled task {made.id} failed 3 times in a row" in notice.text
        assert "anthropic auth: invalid x-api-key" in notice.text
        assert (await stack.current(made)).status == "active"

        outcomes = [await stack.fire(made) for _ in range(2)]
        final = await stack.delivered()
        assert [len(notes) for _, notes in outcomes] == [0, 1]
        assert f"Scheduled task {made.id} failed 5 time(s) in a row" in final.text
        assert "is now disabled" in final.text
        assert await stack.nothing_delivered()

        after = await stack.current(made)
        assert (after.status, after.consecutive_failures) == ("disabled", 5)
        runs = await stack.store.list_runs(made.id)
        assert [r.status for r in runs] == ["failed"] * 5
        assert all("invalid x-api-key" in r.error for r in runs)

        # Disabled: its next time comes and goes without a run.
        assert after.next_run_at is not None
        stack.clock.now = after.next_run_at + MINUTE
        assert await stack.scheduler.tick_once() == 0
    assert len(provider.requests) == 5


async def test_a_success_between_failures_starts_the_count_again(tmp_path: Path) -> None:
    script: list[ScriptStep] = [
        ProviderError("server", "overloaded"),
        ProviderError("server", "overloaded"),
        text_reply("Back."),
        ProviderError("server", "overloaded"),
        ProviderError("server", "overloaded"),
    ]
    async with running(tmp_path, ScriptedProvider(script)) as stack:
        made = await stack.schedule()
        for _ in script:
            await stack.fire(made)

        assert (await stack.delivered()).text == "Back."
        assert await stack.nothing_delivered()
        after = await stack.current(made)
        assert (after.status, after.consecutive_failures) == ("active", 2)


# --- capability mode of a scheduled turn ----------------------------------------------------


FULL_CHAT = {"telegram:default:4242": "full"}


@pytest.mark.parametrize(
    ("chat_modes", "admins", "owner", "mode"),
    [
        # A Telegram chat is safe-chat, whoever made the schedule.
        pytest.param({}, frozenset(), "telegram:77", SAFE_CHAT, id="telegram-user"),
        pytest.param({}, frozenset({"telegram:77"}), "telegram:77", SAFE_CHAT, id="telegram-admin"),
        # A chat set to `full` runs a schedule in `full` only for an admin (or the operator).
        pytest.param(FULL_CHAT, frozenset(), "telegram:77", SAFE_CHAT, id="full-chat-user"),
        pytest.param(FULL_CHAT, frozenset({"telegram:77"}), "telegram:77", FULL, id="full-admin"),
        pytest.param(FULL_CHAT, frozenset(), "cli", FULL, id="full-chat-operator"),
    ],
)
async def test_a_scheduled_turn_runs_in_the_mode_of_its_target_chat(
    tmp_path: Path,
    chat_modes: dict[str, str],
    admins: frozenset[str],
    owner: str,
    mode: CapabilityMode,
) -> None:
    provider = ScriptedProvider([text_reply("ok")])
    policy = ChannelPolicy(chat_modes=chat_modes, admins=admins)
    async with running(tmp_path, provider, policy=policy) as stack:
        made = await stack.schedule(owner=owner)
        await stack.fire(made)
        assert (await stack.delivered()).text == "ok"

    (request,) = provider.requests
    everything = {"calculator", "current_time", *SCHEDULE_TOOLS, "open_file"}
    if mode is SAFE_CHAT:
        assert offered(request) == everything - {"open_file"}
        assert offered(request) <= SAFE_CHAT_TOOLS
    else:
        assert offered(request) == everything
    assert mode.prompt_rules in request.system
    assert telegram.PROMPT_HINT.strip() in request.system


async def test_a_tool_outside_the_mode_is_refused_in_a_scheduled_turn(tmp_path: Path) -> None:
    # Even if the model names a tool it was not offered, the mode refuses the call.
    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="c1", name="open_file", arguments={"path": "/etc/passwd"})),
        lambda request: text_reply(f"Tool said: {request.messages[-1].text}"),
    ]
    provider = ScriptedProvider(script)
    async with running(tmp_path, provider) as stack:
        made = await stack.schedule(owner="telegram:77")
        await stack.fire(made)
        notification = await stack.delivered()

    assert "contents of" not in notification.text
    assert "open_file" in notification.text


# --- the schedule tools ---------------------------------------------------------------------


async def test_a_scheduled_prompt_cannot_create_another_schedule(tmp_path: Path) -> None:
    async with running(tmp_path, DemoProvider()) as stack:
        made = await stack.schedule(prompt="every 5 seconds say hello")

        await stack.fire(made)
        notification = await stack.delivered()

        assert notification.kind == "notification"
        assert "A scheduled task cannot create more schedules." in notification.text
        assert [s.id for s in await stack.store.list_schedules()] == [made.id]
        session = await stack.store.current_session(f"scheduled:{made.id}")
        results = [m for m in await stack.store.list_messages(session.id) if m.role == "tool"]
        assert [(m.name, m.is_error) for m in results] == [("schedule_create", True)]


async def test_a_reminder_asked_for_in_a_chat_arrives_in_that_chat(tmp_path: Path) -> None:
    async with running(tmp_path, DemoProvider()) as stack:
        asked = Inbound(
            address=DM,
            user_id="555",
            user_name="Alice",
            text="remind me in 2 seconds to stretch",
            is_direct=True,
            platform_message_id="1",
        )
        await hand_in(stack.worker, asked)
        sent: list[Outbound] = []
        while not (sent and sent[-1].ends_turn):
            sent.append(await stack.delivered())
        confirmation = sent[-1]
        assert (confirmation.kind, confirmation.address) == ("reply", DM)
        assert "Scheduled" in confirmation.text
        # Telegram shows no notes of tool activity: none were queued for it.
        assert [o for o in sent if o.kind == "progress"] == []

        (made,) = await stack.store.list_schedules(deliver_to=DM)
        assert made.id in confirmation.text
        assert made.cadence == OnceCadence(at=T0 + timedelta(seconds=2))
        # Missed (the bot was down at its time), it still runs within a day.
        assert (made.misfire, made.grace_seconds) == ("run_once", 86_400)
        assert (made.owner, made.prompt, made.deliver_to) == (
            "telegram:555",
            "Reminder: stretch",
            DM,
        )

        # One second later nothing is due; at two seconds the reminder fires.
        stack.clock.advance(timedelta(seconds=1))
        assert await stack.scheduler.tick_once() == 0
        stack.clock.advance(timedelta(seconds=1))
        assert await stack.scheduler.tick_once() == 1
        run_id, _ = await asyncio.wait_for(stack.book.finished.get(), PATIENCE)

        reminder = await stack.delivered()
        assert (reminder.kind, reminder.address) == ("notification", DM)
        assert "stretch" in reminder.text
        assert await stack.nothing_delivered()
        after = await stack.current(made)
        assert (after.status, after.next_run_at) == ("completed", None)
        (run,) = await stack.store.list_runs(made.id)
        assert (run.id, run.status, run.delivery) == (run_id, "succeeded", "pending")


async def test_schedules_made_in_a_chat_are_listed_and_cancelled_only_there(
    tmp_path: Path,
) -> None:
    ids: dict[str, str] = {}

    def echo(request: ModelRequest) -> list[ModelEvent]:
        return text_reply(request.messages[-1].text)

    def cancel(_request: ModelRequest) -> list[ModelEvent]:
        arguments = {"schedule_id": ids["other"]}
        return tool_reply(ToolCall(id="c1", name="schedule_cancel", arguments=arguments))

    script: list[ScriptStep] = [
        tool_reply(ToolCall(id="l1", name="schedule_list", arguments={})),
        echo,
        cancel,
        echo,
    ]
    async with running(tmp_path, ScriptedProvider(script)) as stack:
        mine = await stack.schedule(prompt="water the plants", deliver_to=DM, owner="telegram:555")
        other = await stack.schedule(prompt="someone else's", deliver_to=CHAT)
        ids["other"] = other.id

        listed = await ask(stack, "what is scheduled here?", "1")
        refused = await ask(stack, "cancel the other one", "2")

        assert await stack.store.get_schedule(other.id) == other

    assert mine.id in listed
    assert "water the plants" in listed
    assert other.id not in listed
    assert f"No schedule {other.id!r} in this chat." in refused


async def ask(stack: Stack, text: str, message_id: str) -> str:
    """Send a chat message to the worker; the text of its final reply."""
    inbound = Inbound(
        address=DM, user_id="555", text=text, is_direct=True, platform_message_id=message_id
    )
    await hand_in(stack.worker, inbound)
    while True:
        sent = await stack.delivered()
        if sent.reply_to == inbound.id and sent.ends_turn:
            return sent.text
