"""The playbook's records (`PlaybookRecords`, table `playbook` of migration 0012): counted per
bot, tool sequence and keyword, found by keyword overlap, best first.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio

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
