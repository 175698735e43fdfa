"""The playbook's records (`PlaybookRecords`, table `playbook` of migration 0012): counted per
bot, tool sequence and keyword, found by keyword overlap, best first.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from core.store import PlaybookEntry, PlaybookRecords


async def test_nothing_recorded_nothing_found(store: PlaybookRecords) -> None:
    assert await store.find_sequences("bot", ["k1"], limit=3) == []
    assert await store.find_sequences("bot", [], limit=3) == []


async def test_a_sequence_is_found_by_any_of_its_keywords(store: PlaybookRecords) -> None:
    await store.record_sequence("bot", ["search", "fetch"], ["k1", "k2"])

    found = await store.find_sequences("bot", ["k2", "k9"], limit=3)

    assert found == [PlaybookEntry(tools=("search", "fetch"), matched=1, successes=1)]


async def test_each_success_is_counted(store: PlaybookRecords) -> None:
    for _ in range(3):
        await store.record_sequence("bot", ["weather"], ["k1"])

    [entry] = await store.find_sequences("bot", ["k1"], limit=3)

    assert entry.successes == 3


async def test_concurrent_records_are_all_counted(store: PlaybookRecords) -> None:
    await asyncio.gather(
        *(store.record_sequence("bot", ["weather"], ["k1", "k2"]) for _ in range(4))
    )

    [entry] = await store.find_sequences("bot", ["k1", "k2"], limit=3)

    assert entry == PlaybookEntry(tools=("weather",), matched=2, successes=4)


async def test_more_shared_keywords_first_then_more_successes(store: PlaybookRecords) -> None:
    await store.record_sequence("bot", ["rates", "calc"], ["convert", "euros"])
    for _ in range(3):
        await store.record_sequence("bot", ["ledger"], ["euros"])
    await store.record_sequence("bot", ["calc"], ["euros"])

    found = await store.find_sequences("bot", ["convert", "euros"], limit=3)

    assert [e.tools for e in found] == [("rates", "calc"), ("ledger",), ("calc",)]
    assert [e.matched for e in found] == [2, 1, 1]
    assert (await store.find_sequences("bot", ["convert", "euros"], limit=1))[0].tools == (
        "rates",
        "calc",
    )


async def test_each_bot_has_its_own_playbook(store: PlaybookRecords) -> None:
    await store.record_sequence("one", ["weather"], ["k1"])

    assert await store.find_sequences("two", ["k1"], limit=3) == []
    assert len(await store.find_sequences("one", ["k1"], limit=3)) == 1


async def test_a_record_without_tools_or_keywords_is_nothing(store: PlaybookRecords) -> None:
    await store.record_sequence("bot", [], ["k1"])
    await store.record_sequence("bot", ["weather"], [])

    assert await store.find_sequences("bot", ["k1"], limit=3) == []


async def test_proven_sequences_come_first(store: PlaybookRecords) -> None:
    await store.record_sequence("bot", ["rates", "calc"], ["convert", "euros"])
    for _ in range(3):
        await store.record_sequence("bot", ["ledger"], ["euros"])

    plain = await store.find_sequences("bot", ["convert", "euros"], limit=3)
    proven = await store.find_sequences("bot", ["convert", "euros"], limit=3, proven=3)
    unreached = await store.find_sequences("bot", ["convert", "euros"], limit=3, proven=4)

    assert [e.tools for e in plain] == [("rates", "calc"), ("ledger",)]
    assert [e.tools for e in proven] == [("ledger",), ("rates", "calc")]
    assert [e.tools for e in unreached] == [("rates", "calc"), ("ledger",)]
    assert (await store.find_sequences("bot", ["euros"], limit=1, proven=3))[0].successes == 3


async def test_keep_prunes_the_least_used_then_the_oldest(store: PlaybookRecords) -> None:
    for _ in range(2):
        await store.record_sequence("bot", ["used"], ["k1"])
    await store.record_sequence("bot", ["old"], ["k2"])
    await store.record_sequence("bot", ["newer"], ["k3"])
    await store.record_sequence("other", ["theirs"], ["k2"])

    # A fourth row for a bot kept to 3: the once-used, least recent row goes, in the same
    # write; the row just written stays, and so does another bot's.
    await store.record_sequence("bot", ["newest"], ["k4"], keep=3)

    found = await store.find_sequences("bot", ["k1", "k2", "k3", "k4"], limit=10)
    assert sorted(e.tools for e in found) == [("newer",), ("newest",), ("used",)]
    assert len(await store.find_sequences("other", ["k2"], limit=3)) == 1
    # Within the limit, nothing goes.
    await store.record_sequence("bot", ["used"], ["k1"], keep=3)
    assert len(await store.find_sequences("bot", ["k1", "k2", "k3", "k4"], limit=10)) == 3


async def test_the_rows_being_written_are_never_pruned(store: PlaybookRecords) -> None:
    for _ in range(2):
        await store.record_sequence("bot", ["used"], ["k1", "k2"])

    await store.record_sequence("bot", ["fresh"], ["k3", "k4"], keep=2)

    found = await store.find_sequences("bot", ["k1", "k2", "k3", "k4"], limit=10)
    assert [(e.tools, e.matched) for e in found] == [(("fresh",), 2)]


async def test_an_operator_lists_and_clears_one_bots_playbook(store: PlaybookRecords) -> None:
    for _ in range(2):
        await store.record_sequence("bot", ["search", "fetch"], ["k1", "k2"])
    await store.record_sequence("bot", ["weather"], ["k3"])
    await store.record_sequence("other", ["ledger"], ["k1"])

    listed = await store.list_sequences("bot", limit=10)

    assert [(s.tools, s.keywords, s.successes) for s in listed] == [
        (("search", "fetch"), 2, 2),
        (("weather",), 1, 1),
    ]
    assert all(s.updated_at.utcoffset() == timedelta(0) for s in listed)
    assert [s.tools for s in await store.list_sequences("bot", limit=1)] == [("search", "fetch")]
    assert await store.clear_playbook("bot") == 3
    assert await store.list_sequences("bot", limit=10) == []
    assert await store.clear_playbook("bot") == 0
    assert [s.tools for s in await store.list_sequences("other", limit=10)] == [("ledger",)]
