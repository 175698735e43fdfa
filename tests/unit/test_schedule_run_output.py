"""`schedule_run_output`: the model reads a past run's whole output, only of the asking chat's
own schedules; a long one reaches it cut and is read on with `read_tool_output`. The real
runtime against the real SQLite store, a scripted model."""

from __future__ import annotations

from datetime import UTC, datetime

from core.backends.sql.store import SqlStore
from core.envelopes import Address
from core.events import RunCompleted
from core.messages import Message, ToolCall
from core.modes import SAFE_CHAT
from core.providers import ScriptedProvider
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.runtime import AgentRuntime, ChannelContext
from core.scheduling.book import ScheduleBook
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.scheduling.tools import schedule_tools
from core.tool_calls import MAX_TOOL_OUTPUT
from core.tools import ToolRegistry
from core.tools.tool_output import read_tool_output_tool

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
CHAT = Address(platform="slack", chat="C0123ABCD")
OTHER_CHAT = Address(platform="slack", chat="C0999")
# 20,000 characters, more than the model is shown at once, its end recognisable.
REPORT = "".join(f"report line {i:05d}\n" for i in range(1_000)) + "THE END"


async def _schedule(book: ScheduleBook, owner: str, chat: Address = CHAT) -> Schedule:
    return await book.create(
        cadence=IntervalCadence(seconds=3600, start=T0),
        prompt="the weekly report",
        deliver_to=chat,
        owner=owner,
    )


async def _run(store: SqlStore, schedule: Schedule, run_id: str, output: str) -> None:
    await store.save_run(
        ScheduleRun(
            id=run_id,
            schedule_id=schedule.id,
            due_at=T0,
            started_at=T0,
            status="succeeded",
            output=output,
        )
    )


def call(call_id: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name="schedule_run_output", arguments=arguments)


async def _turn(store: SqlStore, script: list[ScriptStep]) -> ScriptedProvider:
    """One turn of Alice (slack:U1) in CHAT, in safe-chat, the model following `script`."""
    provider = ScriptedProvider(script)
    runtime = AgentRuntime(
        provider=provider,
        model="m",
        tools=ToolRegistry([*schedule_tools(ScheduleBook(store)), read_tool_output_tool(store)]),
        store=store,
        tool_outputs=store,
    )
    context = ChannelContext(
        platform="slack",
        mode=SAFE_CHAT,
        session_key="slack:default:C0123ABCD",
        user_id="U1",
        address=CHAT,
    )
    session = await store.current_session(context.session_key)
    events = [e async for e in runtime.run(session.id, Message.user("the report?"), context)]
    assert isinstance(events[-1], RunCompleted)
    return provider


async def test_the_latest_run_is_read_whole_through_the_cut(store: SqlStore) -> None:
    book = ScheduleBook(store)
    hers = await _schedule(book, "slack:U1")
    await _run(store, hers, "older", "last week's")
    await store.save_run(
        ScheduleRun(
            id="latest",
            schedule_id=hers.id,
            due_at=T0,
            started_at=T0.replace(hour=10),
            status="succeeded",
            output=REPORT,
        )
    )
    script: list[ScriptStep] = [
        tool_reply(call("c1", schedule_id=hers.id)),
        tool_reply(
            ToolCall(
                id="r1",
                name="read_tool_output",
                arguments={"call_id": "c1", "offset": MAX_TOOL_OUTPUT},
            )
        ),
        tool_reply(call("c2", schedule_id=hers.id, run_id="older")),
        text_reply("read it"),
    ]

    provider = await _turn(store, script)

    shown = provider.requests[1].messages[-1]
    assert not shown.is_error
    assert shown.text.startswith(f"Run latest of schedule {hers.id}, 2026-05-01 10:00:00 UTC")
    assert "report line 00000" in shown.text and "THE END" not in shown.text
    assert f'read_tool_output(call_id="c1", offset={MAX_TOOL_OUTPUT}) reads on' in shown.text
    rest = provider.requests[2].messages[-1].text
    assert "THE END" in rest and rest.endswith("the end]")
    named = provider.requests[3].messages[-1].text
    assert named == f"Run older of schedule {hers.id}, 2026-05-01 09:00:00 UTC: succeeded\n" + (
        "last week's"
    )


async def test_only_runs_of_the_asking_chats_own_schedules(store: SqlStore) -> None:
    book = ScheduleBook(store)
    hers = await _schedule(book, "slack:U1")
    his = await _schedule(book, "slack:U2")
    elsewhere = await _schedule(book, "slack:U1", chat=OTHER_CHAT)
    await _run(store, hers, "h1", "hers")
    await _run(store, his, "b1", "his secret report")
    await _run(store, elsewhere, "e1", "another chat's report")
    script: list[ScriptStep] = [
        tool_reply(
            call("mixed", schedule_id=hers.id, run_id="b1"),
            call("his", schedule_id=his.id),
            call("elsewhere", schedule_id=elsewhere.id),
            call("unknown", schedule_id=hers.id, run_id="nosuchrun"),
        ),
        text_reply("ok"),
    ]

    provider = await _turn(store, script)

    results = {m.tool_call_id: m for m in provider.requests[1].messages if m.role == "tool"}
    assert all(result.is_error for result in results.values()), results
    assert f"Schedule {hers.id} has no run 'b1'." in results["mixed"].text
    assert "belongs to someone else" in results["his"].text
    assert f"No schedule {elsewhere.id!r} in this chat." in results["elsewhere"].text
    assert f"Schedule {hers.id} has no run 'nosuchrun'." in results["unknown"].text
    assert not any("report" in r.text for r in results.values())


async def test_a_schedule_that_has_not_run_says_so(store: SqlStore) -> None:
    hers = await _schedule(ScheduleBook(store), "slack:U1")

    provider = await _turn(store, [tool_reply(call("c1", schedule_id=hers.id)), text_reply("ok")])

    said = provider.requests[1].messages[-1].text
    assert said.startswith(f"Schedule {hers.id} has not run yet; next run ")
