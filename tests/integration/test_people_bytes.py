"""`erase_person` on SQLite: the person's words are gone from the database file's bytes and
its write-ahead log's, the full-text index's shadow tables included, not only from its rows."""

from __future__ import annotations

from pathlib import Path

from core.backends.sql.store import SqlStore, sqlite_url
from core.facts import MemoryFact
from core.messages import Message
from core.store import TurnOpening
from core.store.people import Person
from tests.contract.store_support import START, TickingClock

WORDS = (b"zanzibarflamingo", b"xylophonewombat", b"quixoticpelican")


def _holding(folder: Path) -> list[str]:
    return sorted(
        path.name
        for path in folder.iterdir()
        if path.is_file() and any(word in path.read_bytes() for word in WORDS)
    )


async def test_an_erased_persons_words_are_gone_from_the_files(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    store = await SqlStore.open(sqlite_url(folder / "switchboard.db"), clock=TickingClock())
    try:
        await store.open_turn(
            TurnOpening(
                session_id="dm",
                session_key="telegram:b:dm",
                message=Message.user("zanzibarflamingo " * 50).model_copy(
                    update={"author": "telegram:42"}
                ),
                direct_with="telegram:42",
            )
        )
        await store.open_turn(
            TurnOpening(
                session_id="group",
                session_key="telegram:b:-100",
                message=Message.user("quixoticpelican " * 50).model_copy(
                    update={"author": "telegram:42"}
                ),
            )
        )
        for n in range(20):
            fact = MemoryFact.new("bot:telegram:42", f"xylophonewombat number {n}", now=START)
            await store.remember_fact(fact)
        await store.remember_fact(MemoryFact.new("bot:telegram:7", "bob's own fact", now=START))
        assert _holding(folder), "the words were never written"

        erased = await store.erase_person(Person(platform="telegram", user_id="42"))

        assert erased.compacted
        assert _holding(folder) == []
        # The index still works for everyone else.
        assert [f.text for f in await store.search_facts("bot:telegram:7", "own")] == [
            "bob's own fact"
        ]
    finally:
        await store.close()
