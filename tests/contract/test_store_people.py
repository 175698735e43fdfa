"""The personal records contract (`PersonalRecords`): one person's data, exported and erased.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.facts import MemoryFact
from core.messages import Message, ToolCall, Usage
from core.scheduling.models import IntervalCadence, Schedule, ScheduleRun
from core.store import CostEntry, PairingRequest, Store, TurnClose, TurnOpening
from core.store.people import TOMBSTONE, Person
from tests.contract.store_support import START

ANN = Person(platform="telegram", user_id="42")
BOB = "telegram:7"
DM = Address(platform="telegram", bot="b", chat="dm-ann")
GROUP = Address(platform="telegram", bot="b", chat="-100")


def _said(text: str, author: str | None, number: int) -> Message:
    return Message.user(text, source=f"telegram:b:-100:{number}").model_copy(
        update={"author": author, "id": f"m{number}"}
    )


def _cost(session_id: str, entry_id: str, user: str, chat: str, cost: float) -> CostEntry:
    return CostEntry(
        session_id=session_id,
        run_id="r",
        provider="p",
        model="m",
        usage=Usage(input_tokens=10, output_tokens=5),
        cost_usd=cost,
        at=START,
        user=user,
        chat=chat,
        id=entry_id,
    )


async def _ann_and_bob(store: Store) -> tuple[str, str]:
    """Ann's DM, and a group where Ann and Bob talk (with a tool round after Ann's message and
    a message of Ann's from before authors were kept, found by its turn's checkpoint)."""
    dm = await store.open_turn(
        TurnOpening(
            session_id="dm1",
            session_key=DM.session_key,
            message=_said("my zanzibarflamingo secret", str(ANN), 1),
            direct_with=str(ANN),
        )
    )
    group = await store.open_turn(
        TurnOpening(
            session_id="g1",
            session_key=GROUP.session_key,
            message=_said("bob says hello", BOB, 2),
        )
    )
    call = ToolCall(id="call-1", name="clock", arguments={"of": "quixoticpelican"})
    legacy = Inbound(
        address=GROUP,
        user_id=ANN.user_id,
        text="legacy quixoticpelican words",
        platform_message_id="4",
        received_at=START,
    )
    await store.close_turn(
        TurnClose(
            session_id="g1",
            messages=[
                _said("ann asks about quixoticpelican", str(ANN), 3),
                Message.assistant("", tool_calls=[call]),
                Message.tool_result(call, "noon"),
                Message.assistant("it is noon"),
                Message.user("legacy quixoticpelican words", source=legacy.dedupe_key),
            ],
            costs=[
                _cost("dm1", "c1", str(ANN), DM.session_key, 0.5),
                _cost("g1", "c2", str(ANN), GROUP.session_key, 0.25),
                _cost("g1", "c3", BOB, GROUP.session_key, 0.125),
            ],
            checkpoint=Checkpoint(
                run_key=legacy.dedupe_key,
                session_id="g1",
                inbound=legacy,
                started_at=START,
                updated_at=START,
            ),
        )
    )
    for scope, text in (("bot:telegram:42", "ann likes xylophonewombat"), ("bot:" + BOB, "bob")):
        await store.remember_fact(MemoryFact.new(scope, text, now=START))
    schedule = Schedule(
        id="s-ann",
        cadence=IntervalCadence(seconds=3600, start=START),
        prompt="remind me of the jacarandaharbour",
        deliver_to=GROUP,
        owner=str(ANN),
        next_run_at=START,
        created_at=START,
        updated_at=START,
    )
    await store.save_schedule(schedule)
    await store.save_run(
        ScheduleRun(id="run1", schedule_id="s-ann", due_at=START, started_at=START)
    )
    ran = await store.current_session("scheduled:s-ann")
    await store.append_message(ran.id, Message.user("remind me of the jacarandaharbour"))
    await store.record_cost(_cost(ran.id, "c4", str(ANN), GROUP.session_key, 1.0))
    request = PairingRequest(
        platform="telegram",
        user_id="42",
        user_name="Ann",
        code="ABCD2345",
        created_at=START,
        expires_at=START + timedelta(hours=1),
    )
    await store.request_pairing(request, now=START, max_pending=5)
    await store.approve_pairing("telegram", "ABCD2345", now=START, admin=False, by="cli")
    return dm.session.id, group.session.id


async def test_an_export_holds_everything_of_the_person_and_nothing_of_others(
    store: Store,
) -> None:
    dm, group = await _ann_and_bob(store)

    data = await store.personal_data(ANN)

    assert data.person == "telegram:42"
    direct = {c.session_id: [m.text for m in c.messages] for c in data.direct_conversations}
    assert direct[dm] == ["my zanzibarflamingo secret"]
    assert any(c.key == "scheduled:s-ann" for c in data.direct_conversations)
    [in_group] = data.group_messages
    assert in_group.session_id == group
    # Ann's turns: her messages and what answered them; none of Bob's.
    assert [m.text for m in in_group.messages] == [
        "ann asks about quixoticpelican",
        "",
        "noon",
        "it is noon",
        "legacy quixoticpelican words",
    ]
    assert [f.text for f in data.facts] == ["ann likes xylophonewombat"]
    assert [s.id for s in data.schedules] == ["s-ann"]
    assert [r.id for r in data.schedule_runs] == ["run1"]
    assert [(a.platform, a.user_id) for a in data.approvals] == [("telegram", "42")]
    assert sorted(e.id or "" for e in data.costs) == ["c1", "c2", "c4"]
    assert [t["inbound"]["text"] for t in data.turn_records] == ["legacy quixoticpelican words"]
    assert (await store.personal_data(Person(platform="telegram", user_id="999"))).empty


async def test_erasing_leaves_nothing_of_the_person_and_the_rest_whole(store: Store) -> None:
    dm, group = await _ann_and_bob(store)
    days_before = await store.costs_by("day")
    chats_before = {g.key: g for g in await store.costs_by("chat")}
    before = [m for m in await store.list_messages(group)]

    # Whole tool results shown cut: of Ann's DM, of her group turn's call, and of another's.
    await store.keep_tool_output(dm, "call-dm", "ann's page in full")
    await store.keep_tool_output(group, "call-1", "the clock read for ann in full")
    await store.keep_tool_output(group, "call-bob", "bob's page in full")

    erased = await store.erase_person(ANN)

    assert await store.tool_output(dm, "call-dm") is None
    assert await store.tool_output(group, "call-1") is None
    assert await store.tool_output(group, "call-bob") == "bob's page in full"
    assert erased.sessions_deleted == 2  # the DM and the schedule's session
    assert erased.messages_tombstoned == 5
    assert erased.facts_deleted == 1
    assert erased.schedules_deleted == 1
    assert erased.access_records_deleted == 1
    assert erased.checkpoints_deleted == 1
    assert erased.costs_anonymised == 3
    assert (await store.personal_data(ANN)).empty
    assert await store.get_session(dm) is None
    after = await store.list_messages(group)
    assert [m.seq for m in after] == [m.seq for m in before]
    assert [m.text for m in after] == [
        "bob says hello",
        TOMBSTONE,
        "",
        TOMBSTONE,
        TOMBSTONE,
        TOMBSTONE,
    ]
    assert [m.role for m in after] == [m.role for m in before]
    # The tool round of Ann's turn keeps its shape: call and result still pair up.
    assert after[2].tool_calls[0].id == after[3].tool_call_id == "call-1"
    assert after[2].tool_calls[0].name == after[3].name == "clock"
    assert after[2].tool_calls[0].arguments == {}
    assert all(m.author != str(ANN) for m in after)
    assert await store.costs_by("day") == days_before
    chats_after = {g.key: g for g in await store.costs_by("chat")}
    # The group's spending stays the group's; the DM's now counts under no chat.
    assert chats_after[GROUP.session_key] == chats_before[GROUP.session_key]
    assert DM.session_key not in chats_after
    assert chats_after[""].cost_usd == chats_before[DM.session_key].cost_usd
    assert "telegram:42" not in {g.key for g in await store.costs_by("user")}
    assert await store.search_facts("bot:telegram:42", "xylophonewombat") == []
    assert [f.text for f in await store.list_facts("bot:" + BOB)] == ["bob"]
    assert await store.get_schedule("s-ann") is None
    assert await store.approval("telegram", "42") is None
    again = await store.erase_person(ANN)
    assert again.sessions_deleted == again.messages_tombstoned == again.facts_deleted == 0


async def test_a_pending_pairing_request_is_exported_and_erased(store: Store) -> None:
    request = PairingRequest(
        platform="slack",
        user_id="U1",
        user_name="Cleo",
        code="WXYZ2345",
        created_at=START,
        expires_at=START + timedelta(hours=1),
    )
    await store.request_pairing(request, now=START, max_pending=5)
    cleo = Person.parse("slack:U1")

    assert [r.code for r in (await store.personal_data(cleo)).pairing_requests] == ["WXYZ2345"]
    assert (await store.erase_person(cleo)).access_records_deleted == 1
    assert await store.pairing_requests("slack", now=START) == []


async def test_a_dm_from_before_direct_with_was_kept_is_found_by_its_key(store: Store) -> None:
    # Telegram's DM chat is the person's id: a session keyed so is theirs.
    old = await store.current_session("telegram:b:42")
    await store.append_message(old.id, Message.user("older words"))

    data = await store.personal_data(ANN)

    assert [c.session_id for c in data.direct_conversations] == [old.id]


@pytest.mark.parametrize("text", ["telegram", "telegram:", ":42", "telegram:4 2", ""])
def test_a_person_is_platform_and_user_id(text: str) -> None:
    with pytest.raises(ValueError, match="PLATFORM:USER_ID"):
        Person.parse(text)


async def _legacy_group(store: Store) -> str:
    """A group where Ann's only message is from before authors were kept: found through her
    turn's checkpoint, which names this session (and no fork of it)."""
    address = Address(platform="telegram", bot="b", chat="-300")
    legacy = Inbound(
        address=address,
        user_id=ANN.user_id,
        text="old marmalade words",
        platform_message_id="9",
        received_at=START,
    )
    opened = await store.open_turn(
        TurnOpening(
            session_id="g3", session_key=address.session_key, message=_said("bob here", BOB, 8)
        )
    )
    await store.close_turn(
        TurnClose(
            session_id="g3",
            messages=[
                Message.user("old marmalade words", source=legacy.dedupe_key),
                Message.assistant("marmalade noted"),
            ],
            checkpoint=Checkpoint(
                run_key=legacy.dedupe_key,
                session_id="g3",
                inbound=legacy,
                started_at=START,
                updated_at=START,
            ),
        )
    )
    return opened.session.id


async def test_erasing_reaches_the_copies_of_their_words_in_forks(store: Store) -> None:
    dm, group = await _ann_and_bob(store)
    dm_fork = await store.fork_session(dm, name="dm-copy")
    group_fork = await store.fork_session(group)
    legacy = await _legacy_group(store)
    # A fork of a fork: the legacy message (no author) is two copies away from its checkpoint.
    legacy_fork = await store.fork_session(legacy)
    deeper = await store.fork_session(legacy_fork.id)
    await store.append_message(deeper.id, Message.user("bob goes on", author=BOB))

    data = await store.personal_data(ANN)

    assert dm_fork.id in {c.session_id for c in data.direct_conversations}
    in_groups = {c.session_id: [m.text for m in c.messages] for c in data.group_messages}
    assert set(in_groups) == {group, group_fork.id, legacy, legacy_fork.id, deeper.id}
    assert in_groups[deeper.id] == ["old marmalade words", "marmalade noted"]

    erased = await store.erase_person(ANN)

    assert erased.sessions_deleted == 3  # the DM, its fork and the schedule's session
    assert await store.get_session(dm_fork.id) is None
    for session_id in (group, group_fork.id):
        texts = [m.text for m in await store.list_messages(session_id)]
        assert texts[0] == "bob says hello"
        assert not any("quixoticpelican" in text for text in texts)
    for session_id in (legacy, legacy_fork.id, deeper.id):
        texts = [m.text for m in await store.list_messages(session_id)]
        assert texts[:3] == ["bob here", TOMBSTONE, TOMBSTONE]
    assert [m.text for m in await store.list_messages(deeper.id)][-1] == "bob goes on"
    assert (await store.personal_data(ANN)).empty
