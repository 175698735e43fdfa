"""The SQL store on PostgreSQL while the server restarts: every failure of a server that is
away for now is a `StoreUnavailable`, which a turn's `Patience` waits out; a connection the
restart cut is replaced, not handed out again.

A test PostgreSQL of its own (it is stopped and started), reached directly or through a small
TCP relay that can answer new connections with the error a restarting server gives.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Iterator

import pytest

from core.backends.sql.store import SqlReplyRecords, SqlStore
from core.errors import StoreError, StoreUnavailable
from core.messages import Message
from core.outages import Patience
from core.store.replies import ReplyRecord, ShownMessage, digest
from tests.postgres_server import PostgresServer

# What a client sends first when it would like TLS (asyncpg asks; the answer is "N").
_SSL_REQUEST = 80877103


class Relay:
    """Relays TCP connections to PostgreSQL; when `refusing`, it cuts those it relays and
    answers each new connection with a FATAL error of that SQLSTATE, as a server does that
    is shutting down or starting."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.refusing: tuple[str, str] | None = None
        # When set, the next COMMIT is relayed and its answer is not: the connection is cut
        # once the server has answered (the transaction is committed; the client cannot know).
        self.lose_commit_answer = False
        # When set, the next COMMIT itself is lost: the connection is cut before the server
        # has it (the transaction is rolled back; the client cannot know that either).
        self.lose_commit = False
        self.port = 0
        # Set once a connection has been refused.
        self.refused_one = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def refuse(self, sqlstate: str, message: str) -> None:
        self.refusing = (sqlstate, message)
        self.cut()

    def cut(self) -> None:
        for writer in list(self._open):
            writer.close()
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing is not None:
            await self._refuse(reader, writer, *self.refusing)
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        self._open.update((writer, up_writer))
        committing = asyncio.Event()
        pumps = (
            self._to_server(reader, up_writer, committing),
            self._to_client(up_reader, writer, committing),
        )
        for pump in pumps:
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _to_server(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, committing: asyncio.Event
    ) -> None:
        try:
            while data := await source.read(65536):
                if self.lose_commit and b"COMMIT" in data.upper():
                    self.lose_commit = False
                    break  # not relayed: the server sees the client go, mid-transaction
                if self.lose_commit_answer and b"COMMIT" in data.upper():
                    self.lose_commit_answer = False
                    committing.set()
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            sink.close()

    async def _to_client(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, committing: asyncio.Event
    ) -> None:
        try:
            while data := await source.read(65536):
                if committing.is_set():
                    break  # the server's answer to COMMIT: dropped, and the connection cut
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            sink.close()

    async def _refuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: str, text: str
    ) -> None:
        self.refused_one.set()
        try:
            length, code = struct.unpack("!II", await reader.readexactly(8))
            if code == _SSL_REQUEST:
                writer.write(b"N")
                (length,) = struct.unpack("!I", await reader.readexactly(4))
                await reader.readexactly(length - 4)
            else:
                await reader.readexactly(length - 8)
            fields = b"".join(
                kind + value.encode() + b"\0"
                for kind, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", state), (b"M", text))
            )
            writer.write(b"E" + struct.pack("!I", len(fields) + 5) + fields + b"\0")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture(scope="module")
def restartable() -> Iterator[PostgresServer]:
    """A PostgreSQL of this module's own: its tests stop and start it."""
    server = PostgresServer(crash_safe=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def relay(restartable: PostgresServer) -> AsyncIterator[Relay]:
    relay = Relay(restartable.port)
    await relay.start()
    try:
        yield relay
    finally:
        await relay.close()


async def _through(relay: Relay, server: PostgresServer) -> str:
    """The URL of a new database of `server`, reached through `relay`."""
    url = await server.new_database()
    return url.replace(f":{server.port}/", f":{relay.port}/", 1)


@pytest.mark.parametrize(
    ("sqlstate", "text"),
    [
        ("57P03", "the database system is starting up"),
        ("57P01", "terminating connection due to administrator command"),
        ("53300", "sorry, too many clients already"),
    ],
)
async def test_a_server_away_for_now_is_an_outage_and_the_next_call_after_it_works(
    restartable: PostgresServer, relay: Relay, sqlstate: str, text: str
) -> None:
    url = await _through(relay, restartable)
    store = await SqlStore.open(url)
    try:
        session = await store.current_session("telegram:bot:chat")
        relay.refuse(sqlstate, text)
        # Both the pooled connection the relay cut and the new one it refuses.
        with pytest.raises(StoreUnavailable, match=text):
            await store.get_session(session.id)
        with pytest.raises(StoreUnavailable, match=text):
            await store.append_message(session.id, Message.user("hello"))
        relay.refusing = None
        assert await store.get_session(session.id) == session
        await store.append_message(session.id, Message.user("hello"))
        assert [m.text for m in await store.list_messages(session.id)] == ["hello"]
    finally:
        await store.close()


async def test_a_wrong_statement_is_no_outage(restartable: PostgresServer) -> None:
    store = await SqlStore.open(await restartable.new_database())
    try:
        with pytest.raises(StoreError) as raised:
            await store.append_message("no-such-session", Message.user("x"))
        assert not isinstance(raised.value, StoreUnavailable)
    finally:
        await store.close()


@pytest.mark.parametrize("immediate", [False, True], ids=["fast", "immediate"])
async def test_a_write_waits_out_a_restart_and_is_stored_once(
    restartable: PostgresServer, *, immediate: bool
) -> None:
    store = await SqlStore.open(await restartable.new_database())
    patience = Patience("test writes", budget=60)
    try:
        session = await store.current_session("telegram:bot:chat")
        await asyncio.to_thread(restartable.halt, immediate=immediate)

        async def write() -> Message:
            return await store.append_message(session.id, Message.user("hi"))

        written = asyncio.create_task(patience(write))
        while not patience.waiting:  # the first attempt met the stopped server
            await asyncio.wait([written], timeout=0.05)
            assert not written.done(), written
        await asyncio.to_thread(restartable.start)
        stored = await asyncio.wait_for(written, 60)
        assert stored.seq == 1
        # The connections the restart cut are not handed out again: every call works.
        for _ in range(3):
            assert [m.text for m in await store.list_messages(session.id)] == ["hi"]
    finally:
        await store.close()


async def test_a_write_whose_commit_answer_was_lost_is_stored_once(
    restartable: PostgresServer, relay: Relay
) -> None:
    # The server committed; the connection broke before its answer came. Trying the write
    # again, as a turn's patience does after an outage, must not store it a second time.
    url = await _through(relay, restartable)
    store = await SqlStore.open(url)
    try:
        session = await store.current_session("telegram:bot:chat")
        relay.lose_commit_answer = True
        stored = await Patience("test writes", budget=30)(
            lambda: store.append_message(session.id, Message.user("once"))
        )
        assert not relay.lose_commit_answer  # the answer of a COMMIT was lost
        assert stored.seq == 1
        assert [m.text for m in await store.list_messages(session.id)] == ["once"]
    finally:
        await store.close()


async def test_a_write_whose_commit_was_lost_is_made_again(
    restartable: PostgresServer, relay: Relay
) -> None:
    # The connection broke before the server had the COMMIT: nothing was stored, and the
    # write tried again stores it (once).
    url = await _through(relay, restartable)
    store = await SqlStore.open(url)
    try:
        session = await store.current_session("telegram:bot:chat")
        relay.lose_commit = True
        patience = Patience("test writes", budget=30)
        stored = await patience(lambda: store.append_message(session.id, Message.user("once")))
        assert not relay.lose_commit  # a COMMIT was lost
        assert stored.seq == 1
        assert [m.text for m in await store.list_messages(session.id)] == ["once"]
    finally:
        await store.close()


async def test_reply_records_wait_for_a_restarting_server_instead_of_failing_the_delivery(
    restartable: PostgresServer, relay: Relay
) -> None:
    url = await _through(relay, restartable)
    records = await SqlReplyRecords.open(url)
    try:
        shown = ReplyRecord(
            key="telegram:bot:42:m-1",
            seq=2,
            messages=(ShownMessage(message_id="7", digest=digest("hi")),),
            finished=True,
        )
        await records.save(shown)
        relay.refuse("57P03", "the database system is starting up")
        reading = asyncio.create_task(records.get(shown.key))
        await relay.refused_one.wait()
        relay.refusing = None
        # A gateway showing the reply learns what is shown once the server is back.
        assert await reading == shown
    finally:
        await records.close()
