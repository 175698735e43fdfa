"""`erase_person`: the person's words are gone from the database's files, not only from its
rows: on SQLite from the file and its write-ahead log, the full-text index's shadow tables
included; on PostgreSQL from the tables' and indexes' files."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from core.backends.sql.store import SqlStore, parse_url, sqlite_url
from core.facts import MemoryFact
from core.messages import ImagePart, Message
from core.store import TurnOpening
from core.store.people import Person
from tests.contract.store_support import START, TickingClock
from tests.contract.test_store_people import ANN, _ann_and_bob

WORDS = (b"zanzibarflamingo", b"xylophonewombat", b"quixoticpelican")
# The words `_ann_and_bob` gives Ann (her DM, her group turn, her fact, her schedule).
PG_WORDS = (*WORDS, b"jacarandaharbour")


def _holding(folder: Path, words: tuple[bytes, ...] = WORDS) -> list[str]:
    return sorted(
        path.name
        for path in folder.iterdir()
        if path.is_file() and any(word in path.read_bytes() for word in words)
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


async def test_an_erased_persons_images_are_gone_from_the_files(tmp_path: Path) -> None:
    # The images are kept apart from the messages (the `images` table): erasing goes there too.
    folder = tmp_path / "data"
    photo = b"\x89PNG\r\n\x1a\n" + b"flamingopixels" * 200
    store = await SqlStore.open(sqlite_url(folder / "switchboard.db"), clock=TickingClock())
    try:
        for session_id, key, direct in (
            ("dm", "telegram:b:dm", "telegram:42"),
            ("group", "telegram:b:-100", None),
        ):
            message = Message.user("look", [ImagePart(media_type="image/png", data=photo)])
            await store.open_turn(
                TurnOpening(
                    session_id=session_id,
                    session_key=key,
                    message=message.model_copy(update={"author": "telegram:42"}),
                    direct_with=direct,
                )
            )
        assert _holding(folder, (b"flamingopixels",)), "the image was never written"

        await store.erase_person(Person(platform="telegram", user_id="42"))

        assert _holding(folder, (b"flamingopixels",)) == []
    finally:
        await store.close()


async def test_an_erased_persons_words_are_gone_from_postgresqls_table_files(
    postgres_url: str,
) -> None:
    """The same on PostgreSQL: after the erasure's `VACUUM FULL` (a plain `VACUUM` leaves
    dead rows' bytes in the pages) no file of the database holds the words. The server's
    write-ahead log still may, until it is recycled (docs/operators.md)."""
    store = await SqlStore.open(postgres_url, clock=TickingClock())
    engine = create_async_engine(parse_url(postgres_url))
    try:
        await _ann_and_bob(store)
        async with engine.connect() as db:
            folder = Path((await db.execute(text("SHOW data_directory"))).scalar_one())
            oid = (
                await db.execute(
                    text("SELECT oid FROM pg_database WHERE datname = current_database()")
                )
            ).scalar_one()
        files = folder / "base" / str(oid)

        async def holding() -> list[str]:
            async with engine.connect() as db:
                # Written out to the files now, not only in shared memory.
                await db.execute(text("CHECKPOINT"))
            return _holding(files, PG_WORDS)

        assert await holding(), "the words were never written"

        await store.erase_person(ANN)

        assert await holding() == []
    finally:
        await engine.dispose()
        await store.close()
